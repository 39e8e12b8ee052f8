"""Lessons: one Markdown file each, with a small YAML front matter a teacher writes without Python.

::

    ---
    title: Sharing a system prompt
    scenario: |
      blocks 11
      block_size 4
      request r1: S S S S x | output=a
      run
      request r2: S S S S y | output=b     # @r2
      step
    questions:
      - ask: Which blocks does r2 take from the cache?
        after: r2-step            # a scenario line number, a @label, or "end"
        answer: hit_blocks r2     # see engine/lesson_answers.py (lessons/README.md)
    ---
    Prose in Markdown ...

:func:`load_lessons` reads a folder, checks every lesson *by running it* (the scenario
plays, every question is answered by the engine, given options must contain the engine's
answer) and returns the good lessons plus one clear error per bad file, naming the file
and the line. One broken lesson never hides the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from engine.errors import PrefixLabError
from teaching import limits
from teaching.lessons.answers import (
    AnswerError,
    EngineState,
    Expression,
    engine_state_after,
    evaluate,
    format_value,
    generate_options,
    option_matches,
    parse_expression,
)
from teaching.lessons.measure import MeasureSpec
from teaching.scenarios.scenario import AddRequest, Scenario, ScenarioError, parse_scenario, run_scenario

LESSON_KEYS = ("title", "summary", "scenario", "policies", "questions", "measure")
MEASURE_KEYS = ("system", "questions", "block_size")
QUESTION_KEYS = ("id", "ask", "after", "answer", "options", "policy", "explain", "rule")
POLICIES = ("vllm", "classic")
_LABEL_RE = re.compile(r"#\s*@([A-Za-z0-9_\-]+)")


class LessonError(PrefixLabError, ValueError):
    """A lesson file that cannot be used. ``str()`` reads ``01-x.md, line 12: what is wrong``."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path = Path(path)
        self.line = line
        self.message = message
        where = f"{self.path.name}, line {line}" if line is not None else self.path.name
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Question:
    """A predict-then-reveal question. It stores the *expression*, never the answer."""

    id: str
    ask: str
    after: int  # the scenario line whose effect the question is about
    after_text: str  # as the teacher wrote it ("7", "r2-arrives", "end")
    answer: Expression
    options: tuple[str, ...] | None  # teacher-given options, or None to generate them
    policy: str
    explain: str
    file_line: int  # where the question starts in the lesson file
    rule: str = ""  # the rule a wrong answer missed, when the answer word's own rule is not the point


@dataclass
class Lesson:
    """One parsed lesson: front matter, Markdown body, parsed scenario and questions."""

    slug: str
    path: Path
    title: str
    summary: str
    body: str
    scenario_text: str
    scenario: Scenario
    policies: tuple[str, ...]
    questions: list[Question] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)  # @label -> scenario line
    scenario_file_line: int = 0  # file line of scenario line 1
    measure: MeasureSpec | None = None  # chat prompts to time on the real model, if any

    @property
    def action_lines(self) -> list[int]:
        """Scenario lines that do something (what a step slider moves over)."""
        return [a.line_no for a in self.scenario.actions]

    def scenario_line(self, line_no: int) -> str:
        """The text of scenario line ``line_no``, runs of spaces squeezed (for captions)."""
        lines = self.scenario_text.splitlines()
        return " ".join(lines[line_no - 1].split()) if 0 < line_no <= len(lines) else ""


@dataclass(frozen=True)
class Answer:
    """A question answered by the engine: the value, its text, and the options to show."""

    value: object
    text: str
    options: tuple[str, ...]
    correct_index: int
    state: EngineState

    def is_correct(self, choice: str | None) -> bool:
        return choice is not None and choice in self.options and self.options.index(choice) == self.correct_index


# -- reading a file ---------------------------------------------------------------------------------
def split_front_matter(text: str, path: Path) -> tuple[str, str, int]:
    """(front matter, body, file line of the body's first line). The file starts with ``---``."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise LessonError(path, 1, "a lesson starts with a line '---', then the front matter (title, scenario, questions), then '---'.")
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :]).strip(), index + 2
    raise LessonError(path, 1, "the front matter opened with '---' on line 1 is never closed by another '---' line.")


def _node_line(node: yaml.Node) -> int:
    """File line of a YAML node (the front matter starts on file line 2)."""
    return node.start_mark.line + 2


def _mapping(node: yaml.Node, path: Path, what: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    if not isinstance(node, yaml.MappingNode):
        raise LessonError(path, _node_line(node), f"{what} must be 'key: value' lines.")
    return {str(k.value): (k, v) for k, v in node.value}


def _text(node: yaml.Node, path: Path, what: str) -> str:
    if not isinstance(node, yaml.ScalarNode) or not str(node.value).strip():
        raise LessonError(path, _node_line(node), f"{what} must be some text.")
    return str(node.value)


#: Tags a lesson may use: those of YAML's safe loader (no ``!!python/...`` objects).
_SAFE_TAGS = frozenset(tag for tag in yaml.SafeLoader.yaml_constructors if tag is not None)


def _check_plain_yaml(root: yaml.Node, path: Path) -> None:
    """Refuse aliases, unsafe tags and huge front matters before anything walks the tree.

    ``yaml.compose`` shares one node per alias, so a few lines of ``&a [*b, *b, ...]`` become a
    graph that expands to billions of values when loaded: a lesson never needs aliases.
    """
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise LessonError(path, _node_line(node), "YAML aliases (*name) are not allowed in a lesson; write the value out.")
        seen.add(id(node))
        if len(seen) > limits.MAX_LESSON_YAML_NODES:
            raise LessonError(path, None, f"the front matter has over {limits.MAX_LESSON_YAML_NODES:,} YAML values.")
        if node.tag not in _SAFE_TAGS:
            raise LessonError(path, _node_line(node), f"the YAML tag {node.tag!r} is not allowed in a lesson.")
        if isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def _scenario_first_line(node: yaml.Node) -> int:
    """File line of scenario line 1: the line after ``scenario: |``, or the key's own line."""
    block_style = isinstance(node, yaml.ScalarNode) and node.style in ("|", ">")
    return _node_line(node) + (1 if block_style else 0)


def _resolve_after(raw: yaml.Node, lesson: Lesson, path: Path) -> tuple[int, str]:
    text = str(raw.value).strip() if isinstance(raw, yaml.ScalarNode) else ""
    line = _node_line(raw)
    actions = lesson.action_lines
    if text == "end":
        return actions[-1], text
    if text.lstrip("@") in lesson.labels:
        return lesson.labels[text.lstrip("@")], text
    if text.isascii() and text.isdecimal() and len(text) <= 12:  # isdigit() accepts '²', int() does not
        number = int(text)
        if number not in actions:
            raise LessonError(
                path, line,
                f"after: {number} is not a scenario line that does something; use one of {actions}, "
                f"a label ({', '.join('@' + k for k in lesson.labels) or 'none defined'}) or 'end'.",
            )
        return number, text
    raise LessonError(
        path, line,
        f"after: {text!r} is not a scenario line number, a label written '# @name' in the scenario, or 'end'.",
    )


def _labels(scenario_text: str, scenario: Scenario) -> dict[str, int]:
    """``# @name`` comments on action lines name those lines for ``after:``."""
    actions = {a.line_no for a in scenario.actions}
    labels = {}
    for line_no, raw in enumerate(scenario_text.splitlines(), start=1):
        match = _LABEL_RE.search(raw)
        if match and line_no in actions:
            labels[match.group(1)] = line_no
    return labels


def _parse_question(item: yaml.Node, number: int, lesson: Lesson, path: Path) -> Question:
    fields = _mapping(item, path, f"question {number}")
    line = _node_line(item)
    for key, (knode, _) in fields.items():
        if key not in QUESTION_KEYS:
            raise LessonError(path, _node_line(knode), f"unknown question key {key!r}; use {', '.join(QUESTION_KEYS)}.")
    for key in ("ask", "after", "answer"):
        if key not in fields:
            raise LessonError(path, line, f"question {number} has no '{key}:'.")
    after, after_text = _resolve_after(fields["after"][1], lesson, path)
    answer_node = fields["answer"][1]
    try:
        expression = parse_expression(_text(answer_node, path, "answer"))
    except AnswerError as exc:
        raise LessonError(path, _node_line(answer_node), str(exc)) from None
    options = None
    if "options" in fields:
        onode = fields["options"][1]
        raw = yaml.safe_load(yaml.serialize(onode))
        if not isinstance(raw, list) or len(raw) < 2:
            raise LessonError(path, _node_line(onode), "options must be a list of at least two choices, like ['1, 2', '1, 2, 3'].")
        options = tuple(", ".join(str(x) for x in o) if isinstance(o, list) else str(o) for o in raw)
    policy = _text(fields["policy"][1], path, "policy") if "policy" in fields else lesson.policies[0]
    if policy not in lesson.policies:
        raise LessonError(path, _node_line(fields["policy"][1]), f"policy {policy!r} is not one of this lesson's policies {list(lesson.policies)}.")
    return Question(
        id=_text(fields["id"][1], path, "id") if "id" in fields else f"q{number}",
        ask=_text(fields["ask"][1], path, "ask").strip(),
        after=after, after_text=after_text, answer=expression, options=options, policy=policy,
        explain=_text(fields["explain"][1], path, "explain").strip() if "explain" in fields else "",
        file_line=line,
        rule=_text(fields["rule"][1], path, "rule").strip().rstrip(".") if "rule" in fields else "",
    )


def _parse_measure(node: yaml.Node, path: Path) -> MeasureSpec:
    """``measure: {system: ..., questions: [...], block_size: 16}``: prompts for the real-model TTFT table."""
    fields = _mapping(node, path, "measure")
    for key, (knode, _) in fields.items():
        if key not in MEASURE_KEYS:
            raise LessonError(path, _node_line(knode), f"unknown measure key {key!r}; use {', '.join(MEASURE_KEYS)}.")
    if "system" not in fields or "questions" not in fields:
        raise LessonError(path, _node_line(node), "measure needs 'system:' (the shared prompt) and 'questions:' (a list).")
    questions = yaml.safe_load(yaml.serialize(fields["questions"][1]))
    if not isinstance(questions, list) or len(questions) < 2 or not all(isinstance(q, str) and q.strip() for q in questions):
        raise LessonError(path, _node_line(fields["questions"][1]), "measure questions must be a list of at least two questions.")
    block_size = 16
    if "block_size" in fields:
        raw = str(fields["block_size"][1].value)
        if limits.parse_whole_number(raw, 1, limits.MAX_BLOCK_SIZE) is None:
            raise LessonError(path, _node_line(fields["block_size"][1]),
                              f"block_size must be a whole number from 1 to {limits.MAX_BLOCK_SIZE}, got {raw!r}.")
        block_size = int(raw)
    system = _text(fields["system"][1], path, "system").strip()
    return MeasureSpec(system, tuple(q.strip() for q in questions), block_size)


def parse_lesson(text: str, path: Path | str) -> Lesson:
    """Parse one lesson file (no engine run yet). Raises :class:`LessonError`."""
    path = Path(path)
    front, body, _ = split_front_matter(text, path)
    try:
        root = yaml.compose(front)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise LessonError(path, mark.line + 2 if mark else None, f"the front matter is not valid YAML: {problem}.") from None
    if root is None:
        raise LessonError(path, 2, "the front matter is empty; it needs title: and scenario:.")
    _check_plain_yaml(root, path)
    fields = _mapping(root, path, "the front matter")
    for key, (knode, _) in fields.items():
        if key not in LESSON_KEYS:
            raise LessonError(path, _node_line(knode), f"unknown key {key!r}; a lesson's front matter uses {', '.join(LESSON_KEYS)}.")
    for key in ("title", "scenario"):
        if key not in fields:
            raise LessonError(path, 2, f"the front matter has no '{key}:'.")
    snode = fields["scenario"][1]
    scenario_text = _text(snode, path, "scenario")
    first_line = _scenario_first_line(snode)
    try:
        scenario = parse_scenario(scenario_text)
    except ScenarioError as exc:
        line = first_line + exc.line_no - 1 if exc.line_no else _node_line(snode)
        raise LessonError(path, line, f"scenario line {exc.line_no}: {exc.detail}") from None
    if not scenario.actions:
        raise LessonError(path, _node_line(snode), "the scenario has no request or step to play.")
    policies: tuple[str, ...] = ("vllm",)
    if "policies" in fields:
        pnode = fields["policies"][1]
        raw = yaml.safe_load(yaml.serialize(pnode))
        raw = [raw] if isinstance(raw, str) else raw
        if not isinstance(raw, list) or not raw or any(p not in POLICIES for p in raw):
            raise LessonError(path, _node_line(pnode), f"policies must be a list drawn from {list(POLICIES)}, like [vllm, classic].")
        policies = tuple(raw)
    lesson = Lesson(
        slug=path.stem, path=path,
        title=_text(fields["title"][1], path, "title").strip(),
        summary=_text(fields["summary"][1], path, "summary").strip() if "summary" in fields else "",
        body=body, scenario_text=scenario_text, scenario=scenario, policies=policies,
        scenario_file_line=first_line,
    )
    lesson.labels = _labels(scenario_text, scenario)
    if "measure" in fields:
        lesson.measure = _parse_measure(fields["measure"][1], path)
    if "questions" in fields:
        qnode = fields["questions"][1]
        if not isinstance(qnode, yaml.SequenceNode):
            raise LessonError(path, _node_line(qnode), "questions must be a list: each question starts with '- ask:'.")
        lesson.questions = [_parse_question(item, n, lesson, path) for n, item in enumerate(qnode.value, start=1)]
        ids = [q.id for q in lesson.questions]
        for q in lesson.questions:
            if ids.count(q.id) > 1:
                raise LessonError(path, q.file_line, f"question id {q.id!r} is used twice.")
    return lesson


# -- answering ----------------------------------------------------------------------------------------
def request_line(lesson: Lesson, request_id: str) -> int | None:
    return next((a.line_no for a in lesson.scenario.actions if isinstance(a, AddRequest) and a.request_id == request_id), None)


def answer_question(lesson: Lesson, question: Question) -> Answer:
    """Run the scenario up to the question's line and let the engine answer it.

    Raises :class:`LessonError` (naming the question's line) when the engine cannot answer,
    or when the teacher's options do not contain exactly one option equal to the engine's answer.
    """
    path = lesson.path
    try:
        state = engine_state_after(lesson.scenario, question.after, question.policy)
        value = evaluate(question.answer, state)
    except (AnswerError, ScenarioError) as exc:
        raise LessonError(path, question.file_line, f"question {question.id!r}: {exc}") from None
    kind = question.answer.kind
    text = format_value(value, kind)
    if question.options is None:
        options = tuple(generate_options(value, kind, state, seed=f"{lesson.slug}/{question.id}"))
    else:
        options = question.options
    matches = [i for i, o in enumerate(options) if option_matches(o, value, kind)]
    if len(matches) != 1:
        got = "none of the options" if not matches else f"{len(matches)} options"
        raise LessonError(
            path, question.file_line,
            f"question {question.id!r}: the engine's answer to '{question.answer}' after line {question.after} "
            f"is {text}, but {got} say{'s' if not matches else ''} that. Fix the options (or drop them to generate some).",
        )
    return Answer(value, text, options, matches[0], state)


def check_lesson(lesson: Lesson) -> dict[str, Answer]:
    """Play the whole scenario under every policy and answer every question; errors name the line."""
    for policy in lesson.policies:
        try:
            run_scenario(lesson.scenario, policy)
        except ScenarioError as exc:
            line = lesson.scenario_file_line + exc.line_no - 1 if exc.line_no else lesson.scenario_file_line
            raise LessonError(lesson.path, line, f"scenario line {exc.line_no} ({policy}): {exc.detail}") from None
    return {q.id: answer_question(lesson, q) for q in lesson.questions}


def load_lesson(path: Path | str) -> Lesson:
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > limits.MAX_LESSON_BYTES:
            raise LessonError(path, None, f"the file is {size:,} bytes; a lesson may be at most {limits.MAX_LESSON_BYTES:,}.")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LessonError(path, None, f"cannot read the file: {exc}") from None
    lesson = parse_lesson(text, path)
    check_lesson(lesson)
    return lesson


def load_lessons(folder: Path | str) -> tuple[list[Lesson], list[LessonError]]:
    """Every ``*.md`` lesson in ``folder`` (except README.md), in file-name order, checked by running it."""
    lessons: list[Lesson] = []
    errors: list[LessonError] = []
    for path in sorted(Path(folder).glob("*.md")):
        if path.name.lower() == "readme.md":
            continue
        try:
            lessons.append(load_lesson(path))
        except LessonError as exc:
            errors.append(exc)
        except Exception as exc:  # a bug or a limit hit in one file must not hide the others
            errors.append(LessonError(path, None, f"could not be loaded ({type(exc).__name__}: {exc})."))
    return lessons, errors
