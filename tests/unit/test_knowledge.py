"""Cold-tier knowledge documents: the shipped set, the loader's validation, selection."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.vocabulary import FAMILIES, TARGETS
from kope.context.knowledge import (
    SCORE_EXACT_FAMILY,
    KnowledgeError,
    load_knowledge,
    select_knowledge,
)
from kope.errors import KopeError
from kope.memory import KnowledgeDoc

GOOD_META = {
    "id": "K-test-doc",
    "title": "A test document",
    "targets": "[cpu]",
    "families": "[all]",
    "layers": "[vectorization]",
}


def write_doc(folder: Path, name: str = "doc.md", body: str = "Some advice.\n", **fields) -> Path:
    meta = {**GOOD_META, **fields}
    lines = [f"{key}: {value}" for key, value in meta.items() if value is not None]
    path = folder / name
    path.write_text("---\n" + "\n".join(lines) + "\n---\n" + body)
    return path


def make_doc(doc_id, families, targets=("cpu",), layers=("other",), hardware=()):
    return KnowledgeDoc(
        id=doc_id,
        title=doc_id,
        text="body",
        targets=tuple(targets),
        families=tuple(families),
        layers=tuple(layers),
        hardware=tuple(hardware),
        path=Path(doc_id),
    )


# --- the shipped documents -------------------------------------------------


@pytest.fixture(scope="module")
def shipped():
    return load_knowledge()


def test_shipped_documents_parse_and_validate(shipped):
    assert len(shipped) >= 12
    assert all(doc.text and doc.title for doc in shipped)


def test_shipped_document_ids_are_unique_and_prefixed(shipped):
    ids = [doc.id for doc in shipped]
    assert len(ids) == len(set(ids))
    assert all(doc_id.startswith("K-") for doc_id in ids)


def test_shipped_documents_are_250_to_700_words(shipped):
    counts = {doc.id: len(doc.text.split()) for doc in shipped}
    assert {k: v for k, v in counts.items() if not 250 <= v <= 700} == {}


def test_every_target_and_family_has_an_applicable_document(shipped):
    missing = [(t, f) for t in TARGETS for f in FAMILIES if not select_knowledge(shipped, t, f)]
    assert missing == []


def test_every_target_has_a_family_specific_document_for_matmul_conv_and_reductions(shipped):
    for target in TARGETS:
        for family in ("matmul", "convolution", "reduction", "normalization", "elementwise", "fused"):
            assert any(score >= SCORE_EXACT_FAMILY for _, score in select_knowledge(shipped, target, family)), (
                target,
                family,
            )


def test_correctness_note_applies_everywhere(shipped):
    for target in TARGETS:
        for family in FAMILIES:
            assert "K-correctness-pitfalls" in [d.id for d, _ in select_knowledge(shipped, target, family)]


def test_hardware_specific_documents_follow_the_hardware_class(shipped):
    on_arm = [d.id for d, _ in select_knowledge(shipped, "cpu", "elementwise", hardware_class="aarch64-sve")]
    on_x86 = [d.id for d, _ in select_knowledge(shipped, "cpu", "elementwise", hardware_class="x86_64-avx512")]
    assert "K-arm-neon-sve" in on_arm and "K-x86-simd" not in on_arm
    assert "K-x86-simd" in on_x86 and "K-arm-neon-sve" not in on_x86


def test_triton_documents_apply_on_a_cpu_host_running_the_interpreter(shipped):
    ids = [d.id for d, _ in select_knowledge(shipped, "triton", "matmul", hardware_class="x86_64-avx2")]
    assert "K-triton-basics" in ids and "K-triton-matmul-attention" in ids


def test_loading_an_explicit_folder_returns_docs_sorted_by_id(tmp_path):
    write_doc(tmp_path, "b.md", id="K-zeta")
    write_doc(tmp_path, "a.md", id="K-alpha")
    docs = load_knowledge(tmp_path)
    assert [d.id for d in docs] == ["K-alpha", "K-zeta"]
    assert docs[0].path == tmp_path / "a.md"
    assert docs[0].targets == ("cpu",) and docs[0].families == ("all",) and docs[0].hardware == ()
    assert docs[0].text == "Some advice."


def test_an_edited_or_added_document_is_reloaded(tmp_path):
    write_doc(tmp_path, "a.md", id="K-alpha")
    assert [d.title for d in load_knowledge(tmp_path)] == ["A test document"]
    write_doc(tmp_path, "a.md", id="K-alpha", title="A retitled document")
    write_doc(tmp_path, "b.md", id="K-beta")
    assert [(d.id, d.title) for d in load_knowledge(tmp_path)] == [
        ("K-alpha", "A retitled document"),
        ("K-beta", "A test document"),
    ]


def test_a_document_broken_after_loading_is_reported(tmp_path):
    write_doc(tmp_path, "a.md")
    load_knowledge(tmp_path)
    write_doc(tmp_path, "a.md", targets="[gpu]")
    with pytest.raises(KnowledgeError, match="unknown value 'gpu'"):
        load_knowledge(tmp_path)


def test_documents_are_immutable(tmp_path):
    write_doc(tmp_path)
    doc = load_knowledge(tmp_path)[0]
    with pytest.raises(ValidationError, match="frozen"):  # a frozen pydantic model (kope.memory.KnowledgeDoc)
        doc.id = "K-other"


# --- selection -------------------------------------------------------------


def test_selection_ranks_exact_family_above_all():
    docs = [make_doc("K-a-general", ["all"]), make_doc("K-z-matmul", ["matmul"])]
    ranked = select_knowledge(docs, "cpu", "matmul")
    assert [d.id for d, _ in ranked] == ["K-z-matmul", "K-a-general"]
    assert ranked[0][1] > ranked[1][1]


def test_exact_family_outranks_all_even_when_all_matches_layer_and_hardware():
    docs = [
        make_doc("K-a-general", ["all"], layers=["tiling"], hardware=["x86_64"]),
        make_doc("K-z-matmul", ["matmul"]),
    ]
    ranked = select_knowledge(docs, "cpu", "matmul", layer="tiling", hardware_class="x86_64-avx2")
    assert [d.id for d, _ in ranked] == ["K-z-matmul", "K-a-general"]


def test_matching_layer_and_hardware_add_to_the_score():
    docs = [
        make_doc("K-plain", ["all"]),
        make_doc("K-layer", ["all"], layers=["tiling"]),
        make_doc("K-both", ["all"], layers=["tiling"], hardware=["x86_64"]),
    ]
    scores = {
        d.id: s for d, s in select_knowledge(docs, "cpu", "matmul", layer="tiling", hardware_class="x86_64-avx512")
    }
    assert scores["K-both"] > scores["K-layer"] > scores["K-plain"]


def test_selection_ties_break_by_id_and_do_not_depend_on_input_order():
    docs = [make_doc(f"K-doc-{c}", ["all"]) for c in "dbca"]
    first = select_knowledge(docs, "cpu", "reduction")
    second = select_knowledge(list(reversed(docs)), "cpu", "reduction")
    assert [d.id for d, _ in first] == ["K-doc-a", "K-doc-b", "K-doc-c", "K-doc-d"]
    assert first == second


def test_selection_excludes_other_targets_and_other_families():
    docs = [make_doc("K-cuda", ["all"], targets=["cuda"]), make_doc("K-conv", ["convolution"])]
    assert select_knowledge(docs, "cpu", "matmul") == []


def test_hardware_prefix_matches_only_on_a_dash_boundary():
    docs = [make_doc("K-sm8", ["all"], hardware=["nvidia-sm8"]), make_doc("K-nv", ["all"], hardware=["nvidia"])]
    assert [d.id for d, _ in select_knowledge(docs, "cpu", "matmul", hardware_class="nvidia-sm80")] == ["K-nv"]


def test_hardware_restricted_docs_apply_when_hardware_is_unknown():
    docs = [make_doc("K-arm", ["all"], hardware=["aarch64"])]
    assert [d.id for d, _ in select_knowledge(docs, "cpu", "matmul")] == ["K-arm"]


def test_unknown_family_gets_only_general_documents():
    docs = [make_doc("K-general", ["all"]), make_doc("K-matmul", ["matmul"])]
    assert [d.id for d, _ in select_knowledge(docs, "cpu", "unknown")] == ["K-general"]


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"target": "npu", "family": "matmul"}, "target"),
        ({"target": "cpu", "family": "attention"}, "family"),
        ({"target": "cpu", "family": "matmul", "layer": "magic"}, "layer"),
    ],
)
def test_selection_rejects_unknown_names(kwargs, word):
    with pytest.raises(KnowledgeError, match=f"unknown {word}"):
        select_knowledge([], **kwargs)


# --- validation: every rule gives a clear error naming the file --------------


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"id": None}, "field 'id': missing"),
        ({"title": None}, "field 'title': missing"),
        ({"targets": None}, "field 'targets': missing"),
        ({"families": None}, "field 'families': missing"),
        ({"layers": None}, "field 'layers': missing"),
        ({"id": "cpu-openmp"}, "field 'id'"),
        ({"title": "[a, b]"}, "field 'title'"),
        ({"targets": "[gpu]"}, "field 'targets': unknown value 'gpu'"),
        ({"targets": "cpu"}, "field 'targets': must be a list"),
        ({"targets": "[cpu, cpu]"}, "field 'targets': repeated"),
        ({"families": "[matmul, attention]"}, "field 'families': unknown value 'attention'"),
        ({"families": "[all, matmul]"}, "field 'families': 'all' cannot be combined"),
        ({"layers": "[speed]"}, "field 'layers': unknown value 'speed'"),
        ({"hardware": "[X86 64]"}, "field 'hardware'"),
        ({"hardware": "[]"}, "field 'hardware': empty list"),
        ({"author": "me"}, "field 'author': unknown field"),
    ],
)
def test_bad_front_matter_names_the_file_and_field(tmp_path, fields, message):
    path = write_doc(tmp_path, "bad-doc.md", **fields)
    with pytest.raises(KnowledgeError) as info:
        load_knowledge(tmp_path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_empty_body_is_rejected(tmp_path):
    path = write_doc(tmp_path, "empty.md", body="\n   \n")
    with pytest.raises(KnowledgeError, match="field 'body'") as info:
        load_knowledge(tmp_path)
    assert str(path) in str(info.value)


def test_duplicate_ids_name_both_files(tmp_path):
    first = write_doc(tmp_path, "a.md", id="K-same")
    second = write_doc(tmp_path, "b.md", id="K-same")
    with pytest.raises(KnowledgeError, match="duplicate id 'K-same'") as info:
        load_knowledge(tmp_path)
    assert str(first) in str(info.value) and str(second) in str(info.value)


def test_missing_front_matter_is_rejected(tmp_path):
    path = tmp_path / "plain.md"
    path.write_text("# Just markdown\n")
    with pytest.raises(KnowledgeError, match="no front-matter") as info:
        load_knowledge(tmp_path)
    assert str(path) in str(info.value)


def test_invalid_yaml_is_rejected(tmp_path):
    path = tmp_path / "broken.md"
    path.write_text("---\nid: [K-x\n---\nbody\n")
    with pytest.raises(KnowledgeError, match="not valid YAML") as info:
        load_knowledge(tmp_path)
    assert str(path) in str(info.value)


def test_front_matter_that_is_not_a_mapping_is_rejected(tmp_path):
    path = tmp_path / "list.md"
    path.write_text("---\n- a\n- b\n---\nbody\n")
    with pytest.raises(KnowledgeError, match="must be a mapping"):
        load_knowledge(tmp_path)


def test_missing_or_empty_folder_is_an_error(tmp_path):
    with pytest.raises(KnowledgeError, match="not found"):
        load_knowledge(tmp_path / "nowhere")
    with pytest.raises(KnowledgeError, match="no knowledge documents"):
        load_knowledge(tmp_path)


def test_knowledge_error_is_a_kope_error_with_usage_exit_code():
    assert issubclass(KnowledgeError, KopeError)
    assert KnowledgeError("x").exit_code == 2


def test_the_server_takes_only_the_stored_part_of_a_document():
    from kope.memory.journaling import knowledge_data
    from kope.server.api import KnowledgeBody

    doc = load_knowledge()[0]
    assert tuple(knowledge_data(doc)) == KnowledgeDoc.STORED  # what is journaled, sent and stored
    sent = {"id": doc.id, "title": doc.title, "text": doc.text, "targets": ["cpu"], "families": ["all"]}
    assert KnowledgeBody.model_validate({"docs": [sent]}).docs[0].id == doc.id
    for extra in ({"path": "/etc/passwd"}, {"layers": ["tiling"]}, {"hardware": ["x86_64"]}):
        with pytest.raises(ValidationError, match=f"unknown field '{next(iter(extra))}'"):
            KnowledgeBody.model_validate({"docs": [{**sent, **extra}]})
