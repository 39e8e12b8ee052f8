from collections.abc import Iterator

import pytest

from tests.vllm.venv_runner import VenvRunners


@pytest.fixture(scope="session")
def vllm_venvs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VenvRunners]:
    """Runs a module in a vLLM venv, importing vLLM once per venv for the whole session."""
    runners = VenvRunners(lambda: tmp_path_factory.mktemp("vllm-runner"))
    yield runners
    runners.stop()
