import pytest

from tests.model.tiny_models import tiny_model_dirs  # noqa: F401  (a fixture)
from tests.server.harness import STUDENT_KEYS, TEACHER_KEY, start_server

#: A small pool, so a few requests are enough to force evictions.
NUM_BLOCKS = 96


@pytest.fixture(scope="session")
def smol_server(tmp_path_factory):
    """The real default model behind the real HTTP server, with student and teacher keys."""
    keys = [arg for key in STUDENT_KEYS for arg in ("--api-key", key)]
    server = start_server("--num-blocks", str(NUM_BLOCKS), "--max-concurrent-per-client", "3",
                          "--teacher-key", TEACHER_KEY, *keys, log_dir=tmp_path_factory.mktemp("serve"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tiny_server(tmp_path_factory, tiny_model_dirs):  # noqa: F811
    """A tiny random llama (no tokenizer: token-id prompts only): starts in seconds, for limits and fuzzing."""
    server = start_server("--model", tiny_model_dirs["llama"], "--served-model-name", "tiny",
                          "--num-blocks", "64", "--block-size", "4", "--max-prompt-tokens", "64",
                          "--max-tokens-limit", "48", "--max-concurrent-per-client", "2", "--request-timeout", "20",
                          log_dir=tmp_path_factory.mktemp("serve-tiny"))
    yield server
    server.stop()
