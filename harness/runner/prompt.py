"""The instruction given to the agent for one instance: a prompt template filled per instance.

Rules:
- The template is `--prompt-template FILE` (UTF-8 text, used as it is), else DEFAULT_TEMPLATE:
  the question, the task's files, and the answer conventions of the instance's benchmark.
- Placeholders, in Python's format syntax (a literal brace is doubled: `{{`, `}}`):
    {question}      the task's question, stripped of surrounding whitespace
    {files}         "The file(s) for this task are in the sandbox at: /workspace/a.csv, ..." (empty without files,
                    and for a benchmark whose files are its environment's own: `Benchmark.files_shown`)
    {conventions}   how an instance of its benchmark is worked and answered (`Benchmark.conventions`, of
                    `Instance.benchmark`: harness/benchmark.py)
    {instance_id}   the instance's id
- For a task without files, a line holding nothing but {files} is dropped, with one blank line
  after it (so the default template leaves no gap).
- A template must use {question}. Any other name, a conversion or format spec ({question!r},
  {question:>9}), an attribute or index ({question.x}), a lone brace, or a file that cannot be
  read as UTF-8 is an InputError naming --prompt-template (exit 2, before any container).
- An instance of several steps (its metadata's STEPS, datasets/model.py: each later step's question, in
  order; a Harbor task's [[steps]]) has each of those rendered the same way, its question in {question}:
  the agent's process asks each of a fresh run of the agent when the instance's tool family calls for the
  next step (runner/agent_process/child.py).
- The run's configuration records the template (`PromptTemplate.fingerprint`): "default", or the
  sha256 of the file's text; a resume with another template is refused without --force.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from pathlib import Path

from harness.benchmark import get
from harness.datasets.model import STEPS, Instance
from harness.errors import InputError
from harness.sandbox.contract import WORKSPACE

PLACEHOLDERS = ("question", "files", "conventions", "instance_id")
DEFAULT_TEMPLATE = "{question}\n\n{files}\n\n{conventions}"
_FILES_ALONE = re.compile(r"^\s*\{files\}\s*$")


def conventions(instance: Instance) -> str:
    """How an instance of its benchmark is worked and answered (`Benchmark.conventions`)."""
    return get(instance.benchmark).conventions


def _values(instance: Instance) -> dict[str, str]:
    files = ""
    if instance.files and get(instance.benchmark).files_shown:
        paths = ", ".join(f"{WORKSPACE}/{name}" for name in instance.files)
        files = f"The file(s) for this task are in the sandbox at: {paths}"
    return {"question": instance.question.strip(), "files": files, "conventions": conventions(instance),
            "instance_id": instance.instance_id}


@dataclass(frozen=True)
class PromptTemplate:
    text: str = DEFAULT_TEMPLATE

    @property
    def fingerprint(self) -> str:
        """What run.json records: "default", or the sha256 of the template's text."""
        if self.text == DEFAULT_TEMPLATE:
            return "default"
        return "sha256:" + hashlib.sha256(self.text.encode()).hexdigest()[:16]

    def render(self, instance: Instance) -> str:
        values = _values(instance)
        lines: list[str] = []
        after_dropped = False
        for line in self.text.split("\n"):
            if not values["files"] and _FILES_ALONE.match(line):
                after_dropped = True
                continue
            if not (after_dropped and not line.strip()):
                lines.append(line.format_map(values))
            after_dropped = False
        return "\n".join(lines)


DEFAULT = PromptTemplate()


def check_template(text: str, where: str) -> PromptTemplate:
    """The template in `text`, checked (rules above); `where` names it in the error."""
    names = []
    try:
        for _, name, spec, conversion in string.Formatter().parse(text):
            if name is None:
                continue
            if name not in PLACEHOLDERS:
                raise InputError(f"{where}: unknown placeholder {{{name}}}; known: "
                                 + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS) + " (a literal brace is doubled: {{ }})")
            if spec or conversion:
                raise InputError(f"{where}: placeholder {{{name}}} takes no conversion or format spec")
            names.append(name)
    except ValueError as exc:
        raise InputError(f"{where}: {exc} (a literal brace is doubled: {{{{ }}}})") from None
    if "question" not in names:
        raise InputError(f"{where}: the template never uses {{question}}, so the agent would not see the task")
    return PromptTemplate(text)


def load_template(path: Path | None) -> PromptTemplate:
    """--prompt-template FILE, checked; the default without one."""
    if path is None:
        return DEFAULT
    where = f"--prompt-template {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{where}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    return check_template(text, where)


def instruction(instance: Instance, template: PromptTemplate = DEFAULT) -> str:
    return template.render(instance)


def later_steps(instance: Instance, template: PromptTemplate = DEFAULT) -> list[str]:
    """The instruction of each of the instance's steps after the first (its metadata's STEPS), in order."""
    return [template.render(instance.model_copy(update={"question": question}))
            for question in instance.metadata.get(STEPS) or []]
