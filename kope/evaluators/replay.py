"""The replay evaluator (``--evaluator replay:DIR``): answers proposals from recorded search spaces.

``DIR`` holds ``kope.space/1`` files (``kope bench record-space``, format in
``kope.evaluators.space``). A proposal is answered by (operator, template, setting):
the outcome the real harness returned for that setting when the space was recorded,
the same ``kope.outcome/1`` record, on the recorded hardware (runs are filed under it).
Nothing is compiled or timed. The loop records the attempt as a live one and marks its
outcome ``replayed`` (``Attempt.replayed``; the Outcome node's ``replayed`` property).

Refused, each with one clear error (``ReplayMiss``, exit 2), never answered by a guess:

* an operator or target the folder holds no space for;
* a setting (or, for a proposal without a template setting, a kernel text) not recorded;
* a kernel that is not the one recorded for the setting (the template changed since; a kernel that differs
  only by the cache sizes ``tiles=auto`` writes into it, rendered on another machine, is the recorded one);
* another case selection than the recorded one, or a task file that changed since.

``space(operator, target)`` tells the loop which settings exist, so the offline proposer
proposes only recorded ones (a simulation mode: the proposer is limited to the record).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kope.boundary import CaseSelection, Hardware, Outcome, read_task_info, select_cases
from kope.errors import UsageError
from kope.evaluators.space import SpaceFile, SpaceFileError, read_spaces, settings_key
from kope.evaluators.spec import EvaluatorSpec
from kope.memory.ids import kernel_id

if TYPE_CHECKING:
    from kope.boundary import EvalOptions


class ReplayMiss(UsageError):
    """A proposal the recorded spaces cannot answer."""


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class ReplayEvaluator:
    replays = True

    def __init__(self, spec: EvaluatorSpec) -> None:
        assert spec.folder is not None
        self.spec = spec
        self.folder = Path(spec.folder)
        self.files = read_spaces(self.folder)
        ids = {(f.target, f.hardware.id): f for f in self.files}
        targets = [t for t, _ in ids]
        if len(targets) != len(set(targets)):
            listed = "; ".join(
                f"{f.path.name if f.path else f.operator}: {f.hardware.class_} [{hw}]" for (_, hw), f in ids.items()
            )
            raise SpaceFileError(
                f"{self.folder} holds spaces recorded on different hardware ({listed})",
                hint="one replay must answer as one machine: keep one machine's spaces per folder",
            )
        self._spaces: dict[tuple[str, str], dict[str, SpaceFile]] = {}
        for f in self.files:
            by_template = self._spaces.setdefault((f.operator, f.target), {})
            if f.template in by_template:
                raise SpaceFileError(f"{self.folder} holds two spaces for {f.operator} / {f.template}")
            by_template[f.template] = f

    # -- the Evaluator protocol ------------------------------------------------------------------------
    def hardware(self, target: str) -> Hardware:
        for f in self.files:
            if f.target == target:
                return f.hardware
        raise ReplayMiss(
            f"{self.folder} holds no space recorded for the {target} target "
            f"(it holds: {', '.join(sorted({f.target for f in self.files}))})"
        )

    def prestart(self, target: str) -> None:
        """Nothing to start: no candidate is compiled or run."""

    def close(self) -> None:
        pass

    def evaluate(self, task_path: Path, candidate: Path, options: EvalOptions) -> Outcome:
        """The recorded outcome of the kernel text in ``candidate`` (looked up by its hash)."""
        if options.case_set != "visible":
            raise ReplayMiss(
                f"a replay answers only the recorded visible cases, not case set {options.case_set!r}",
                hint="held-out cases are not recorded: skip the final evaluation (`kope bench --no-final`)",
            )
        cases = options.cases if options.cases is None or isinstance(options.cases, str) else list(options.cases)
        return self.evaluate_setting(
            task_path, candidate, target=options.target, cases=cases, template=None, settings=None
        )

    # -- the recorded space ----------------------------------------------------------------------------
    def operators(self, target: str) -> list[str]:
        return sorted({op for op, t in self._spaces if t == target})

    def _files(self, operator: str, target: str) -> dict[str, SpaceFile]:
        files = self._spaces.get((operator, target))
        if not files:
            have = ", ".join(self.operators(target)) or "none"
            raise ReplayMiss(
                f"no recorded space for {operator} on {target} in {self.folder} (recorded: {have})",
                hint=f"record it with `kope bench record-space --operators {operator} --out {self.folder} --resume`",
            )
        return files

    def space(self, task_path: Path, target: str, cases: CaseSelection) -> dict[str, frozenset[str]]:
        """Template -> the settings recorded for the task on ``target`` (``settings_key`` texts); ``ReplayMiss``
        when the folder cannot answer a run of this task with this case selection."""
        files = self._files(read_task_info(task_path).operator, target)
        for f in files.values():
            self._check_request(f, task_path, cases)
        return {name: frozenset(f.done()) for name, f in files.items()}

    def optimum(self, operator: str, target: str) -> float | None:
        """The best recorded speedup of a correct setting (every template of the operator)."""
        values = [v for f in self._files(operator, target).values() if (v := f.optimum()) is not None]
        return max(values, default=None)

    def evaluate_setting(
        self,
        task_path: Path,
        candidate: Path,
        *,
        target: str,
        cases: CaseSelection,
        template: str | None,
        settings: Mapping[str, Any] | None,
    ) -> Outcome:
        """The recorded outcome of ``settings`` of ``template`` for the task (``ReplayMiss`` when not recorded).

        Without a template setting (e.g. an LLM's own kernel), the kernel text is looked up among the
        operator's recorded kernels."""
        info = read_task_info(task_path)
        files = self._files(info.operator, target)
        code = candidate.read_text(encoding="utf-8")
        code_hash = kernel_id(code)
        if template is None or settings is None:
            found = [(f, e) for f in files.values() for e in f.settings if e["kernel"] == code_hash]
            if not found:
                raise ReplayMiss(
                    f"the candidate {candidate.name} for {info.operator} is not a kernel of the recorded space "
                    f"({sum(len(f.settings) for f in files.values())} settings recorded in {self.folder})",
                    hint="a replay answers only recorded template settings; evaluate anything else live",
                )
            space, entry = found[0]
        else:
            if template not in files:
                raise ReplayMiss(
                    f"template {template!r} is not recorded for {info.operator} (recorded: {', '.join(sorted(files))})"
                )
            space = files[template]
            found_entry = space.entry(settings)
            if found_entry is None:
                raise ReplayMiss(
                    f"setting {settings_key(settings)} of template {template!r} is outside the recorded space of "
                    f"{info.operator} ({len(space.settings)} settings recorded in {space.path})",
                    hint="a replay answers only recorded settings; record more with `kope bench record-space --resume "
                    "--max-settings N`",
                )
            entry = found_entry
            if entry["kernel"] != code_hash and not self._rendered_on_the_recording_machine(
                space, task_path, target, settings, code_hash, entry["kernel"]
            ):
                raise ReplayMiss(
                    f"the kernel rendered for {info.operator} / {template} {settings_key(settings)} is not the one "
                    f"recorded in {space.path} (the template or its rendering changed since the recording)",
                    hint="record the space again",
                )
        self._check_request(space, task_path, cases)
        return space.outcome(entry)

    @staticmethod
    def _rendered_on_the_recording_machine(
        space: SpaceFile, task_path: Path, target: str, settings: Mapping[str, Any], code_hash: str, recorded: str
    ) -> bool:
        """The candidate is the template's rendering of ``settings`` on this machine and the recorded kernel its
        rendering with the recording machine's cache sizes (``tiles=auto`` writes them into the kernel): the two
        differ only by the machine, not by a change of the template since the recording."""
        from kope.boundary import machine_caches, render_for_task, task_structure, template_for

        caches = space.hardware.caches
        template = template_for(space.served_as, target)
        if not caches or caches == machine_caches() or template is None:
            return False
        match = task_structure(task_path, space.operator, target)
        if kernel_id(render_for_task(template, match, settings)) != code_hash:
            return False
        return kernel_id(render_for_task(template, match, settings, caches)) == recorded

    def _check_request(self, space: SpaceFile, task_path: Path, cases: CaseSelection) -> None:
        if file_sha256(task_path) != space.task_sha256:
            raise ReplayMiss(
                f"the task file {task_path} changed since {space.path} was recorded",
                hint="record the space again",
            )
        names = tuple(c.name for c in select_cases(read_task_info(task_path), cases))
        if names != space.cases:
            raise ReplayMiss(
                f"the run evaluates cases {', '.join(names)} of {space.operator}, but {space.path} recorded "
                f"{', '.join(space.cases)}",
                hint=f"run with the recorded case selection (--cases {space.harness.get('case_selection') or 'all'})",
            )
