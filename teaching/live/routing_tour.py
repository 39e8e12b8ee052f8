"""The routing tour: the same prompts through vLLM's router under two policies, watched live.

A class on K replicas has K prefix caches. Three "courses" each share one long system prompt,
and their students' questions arrive interleaved, as in a room. Under ``round_robin`` request *n*
goes to replica *n mod K*, so every replica ends up computing every course's system prompt; under
``kv_aware`` the router follows the replicas' KV events and sends each course back to the replica
that already holds its prompt. The tour sends the same prompts under each policy, one at a time,
starting every pass from empty caches (``/reset_prefix_cache``, which the Live page shows as the
trees emptying), and says where each request landed and how many of its prompt tokens were cached.

Which replica served a request is read from the replicas' own ``/metrics``: the requests go one at
a time, so exactly one replica's ``vllm:prompt_tokens`` grows (a student sending at the same moment
would blur that; the tour then says so instead of guessing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.errors import PrefixLabError
from engine.server.cluster import Cluster
from teaching.live.client import send_chat
from teaching.live.metrics import fetch_metrics

#: The two policies the tour compares, in the order it plays them.
TOUR_POLICIES = ("round_robin", "kv_aware")
#: Each course's shared system prompt: long enough to fill several 16-token blocks.
COURSES: dict[str, str] = {
    "biology": "You are the biology tutor of a first-year course. The course covers cells, membranes, "
               "enzymes, DNA replication, transcription, translation, mitosis and meiosis. Answer in two "
               "short sentences, name the organelle or molecule involved, and end with one question that "
               "checks the student understood.",
    "history": "You are the history tutor of a first-year course on the industrial revolution: steam engines, "
               "railways, textile mills, the growth of cities, child labour and the first trade unions. Answer "
               "in two short sentences, give one date and one place, and end with one question that asks the "
               "student to compare two periods.",
    "chemistry": "You are the chemistry tutor of a first-year course. The course covers atoms, the periodic "
                 "table, ionic and covalent bonds, moles, reaction rates, equilibrium, acids and bases. Answer "
                 "in two short sentences, write one balanced equation when it helps, and end with one question "
                 "that checks the student understood.",
}
STUDENTS = ("Ada", "Ben", "Chen", "Dana", "Emil", "Fatou")
QUESTIONS = ("What should I revise first?", "Can you give me an example?", "Why does this matter?",
             "What is a common mistake?", "How would the exam ask this?", "Can you say it more simply?")
#: Seconds the router's subscribers get to connect to every replica before the first request.
SUBSCRIBE_WAIT_S = 1.0

Say = Callable[[str], None]


class TourError(PrefixLabError):
    """A tour request could not be placed on exactly one replica (someone else was sending too)."""


@dataclass(frozen=True)
class TourPrompt:
    course: str
    student: str
    question: str

    @property
    def label(self) -> str:
        return f"{self.student} ({self.course})"

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": COURSES[self.course]}, {"role": "user", "content": self.question}]


def tour_prompts(courses: int = 3, students: int = 4) -> list[TourPrompt]:
    """``students`` questions per course, interleaved course by course (A1 B1 C1 A2 B2 C2 ...)."""
    if not 1 <= courses <= len(COURSES) or not 1 <= students <= len(STUDENTS):
        raise ValueError(f"the tour has at most {len(COURSES)} courses and {len(STUDENTS)} students per course")
    names = list(COURSES)[:courses]
    return [TourPrompt(course, STUDENTS[s], QUESTIONS[(s + c) % len(QUESTIONS)])
            for s in range(students) for c, course in enumerate(names)]


@dataclass(frozen=True)
class Landing:
    """Where one request went and what the cache there gave it."""

    prompt: TourPrompt
    replica: int
    prompt_tokens: int
    cached_tokens: int


@dataclass(frozen=True)
class TourPass:
    """Every request of one pass under one policy."""

    policy: str
    landings: tuple[Landing, ...]

    def replicas_per_course(self) -> dict[str, list[int]]:
        """Each course -> the replicas that computed its system prompt (sorted)."""
        seen: dict[str, set[int]] = {}
        for landing in self.landings:
            seen.setdefault(landing.prompt.course, set()).add(landing.replica)
        return {course: sorted(replicas) for course, replicas in seen.items()}

    @property
    def hit_rate(self) -> float:
        prompt = sum(landing.prompt_tokens for landing in self.landings)
        return sum(landing.cached_tokens for landing in self.landings) / prompt if prompt else 0.0

    def summary(self) -> str:
        spread = "; ".join(f"{course} on replica{'s' if len(r) > 1 else ''} {', '.join(map(str, r))}"
                           for course, r in self.replicas_per_course().items())
        prefills = sum(len(r) for r in self.replicas_per_course().values())
        return (f"{self.policy}: {len(self.landings)} requests, {self.hit_rate:.0%} of prompt tokens cached; "
                f"{prefills} system-prompt prefills for {len(self.replicas_per_course())} courses ({spread})")


def prompt_tokens_seen(urls: Sequence[str]) -> list[float]:
    """Each replica's ``vllm:prompt_tokens`` counter."""
    return [fetch_metrics(url, timeout_s=10.0).prompt_tokens or 0.0 for url in urls]


def send_and_locate(router_url: str, replica_urls: Sequence[str], prompt: TourPrompt, model: str,
                    max_tokens: int = 8) -> Landing:
    """Send one chat through the router and find the one replica whose prompt-token counter grew."""
    before = prompt_tokens_seen(replica_urls)
    result = send_chat(router_url, prompt.messages(), max_tokens=max_tokens, model=model)
    after = prompt_tokens_seen(replica_urls)
    grew = [k for k, (b, a) in enumerate(zip(before, after)) if a > b]
    if len(grew) != 1:
        raise TourError(f"{prompt.label}: prompt tokens grew on replicas {grew}, not on exactly one "
                        "(were other clients sending? the tour needs the class to itself)")
    return Landing(prompt, grew[0], result.prompt_tokens or 0, result.cached_tokens or 0)


def run_pass(cluster: Cluster, policy: str, prompts: Sequence[TourPrompt], say: Say, *, delay_s: float = 1.0,
             binary: str | None = None) -> TourPass:
    """Empty every replica's cache, put a fresh router with ``policy`` in front, send ``prompts`` one by one."""
    cluster.reset_prefix_caches()
    cluster.switch_policy(policy, binary)
    time.sleep(SUBSCRIBE_WAIT_S)
    urls = [replica.url for replica in cluster.config.replica_list()]
    model = cluster.served_model()
    landings = []
    for prompt in prompts:
        landing = send_and_locate(cluster.config.router_url, urls, prompt, model)
        say(f"  {prompt.label:<18} -> replica-{landing.replica}   "
            f"{landing.cached_tokens:>4} of {landing.prompt_tokens:>4} prompt tokens cached")
        landings.append(landing)
        time.sleep(delay_s)  # the Live page shows each landing before the next
    return TourPass(policy, tuple(landings))


def run_tour(cluster: Cluster, say: Say, *, policies: Sequence[str] = TOUR_POLICIES, courses: int = 3,
             students: int = 4, delay_s: float = 1.0, pause: Callable[[str], object] | None = None,
             binary: str | None = None) -> list[TourPass]:
    """Every policy in turn on the same prompts; ``pause(message)`` (e.g. ``input``) waits for the teacher."""
    prompts = tour_prompts(courses, students)
    passes = []
    for policy in policies:
        note = (f"Routing tour, {policy}: {len(prompts)} chats ({courses} courses x {students} students, "
                "each course one shared system prompt) from empty caches.")
        if pause is not None:
            pause(note + " Press Enter to send them.")
        else:
            say(note)
        passes.append(run_pass(cluster, policy, prompts, say, delay_s=delay_s, binary=binary))
        say(passes[-1].summary())
    return passes
