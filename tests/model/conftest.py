import pytest

from tests.model.tiny_models import save_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory):
    """Folders of tiny llama / qwen2 / gpt2 models, built once per test session."""
    root = tmp_path_factory.mktemp("tiny-models")
    return {family: str(save_tiny_model(family, root / family)) for family in ("llama", "qwen2", "gpt2")}
