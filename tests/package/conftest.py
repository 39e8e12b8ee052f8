from tests.model.tiny_models import tiny_model_dirs  # noqa: F401  (a fixture)
