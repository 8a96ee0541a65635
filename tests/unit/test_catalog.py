"""The Cypher catalog: every statement is a file, looked up by name."""

import pytest

from kope.db.catalog import CypherCatalog, check_identifier, default_catalog
from kope.errors import CatalogError


def test_shipped_statements_load_with_their_mode():
    catalog = default_catalog()
    assert "db/counts" in catalog.names()
    assert catalog.get("db/counts").mode == "read"
    assert catalog.get("db/clear_batch").mode == "write"
    assert "//" not in catalog.get("db/counts").text


def test_unknown_statement_raises(tmp_path):
    with pytest.raises(CatalogError, match="no Cypher statement named 'db/nope'"):
        default_catalog().get("db/nope")


def test_multi_statement_files_split_on_semicolons(tmp_path):
    (tmp_path / "s.cypher").write_text(
        "// schema\nCREATE INDEX a IF NOT EXISTS FOR (n:A) ON (n.x);\n\nCREATE INDEX b IF NOT EXISTS FOR (n:B) ON (n.y);\n"
    )
    catalog = CypherCatalog(tmp_path)
    assert catalog.statements("s") == [
        "CREATE INDEX a IF NOT EXISTS FOR (n:A) ON (n.x)",
        "CREATE INDEX b IF NOT EXISTS FOR (n:B) ON (n.y)",
    ]


def test_no_shipped_statement_formats_values_into_cypher():
    # Parameters are $names; Python format fields or f-string braces would mean injected values.
    for name in default_catalog().names():
        text = default_catalog().get(name).text
        assert "{}" not in text and "%s" not in text, name


def test_identifiers_are_checked_against_an_allow_list():
    assert check_identifier("Decision", {"Decision", "Insight"}) == "Decision"
    with pytest.raises(CatalogError, match="not allowed"):
        check_identifier("Decision) DETACH DELETE (n", {"Decision"})
