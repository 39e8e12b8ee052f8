"""PrefixLab's engine: a small LLM engine with a vLLM-faithful prefix cache.

Usable without Streamlit (notebooks, CLI, tests). Heavy imports (torch, transformers)
happen only when a real model is loaded.
"""

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.outputs import RequestMetrics, RequestOutput
from engine.request import Request, SamplingParams

__all__ = ["EngineConfig", "LLMEngine", "Request", "RequestMetrics", "RequestOutput", "SamplingParams"]
