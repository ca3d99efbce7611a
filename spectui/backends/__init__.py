"""Server backends behind one contract (base.py): llama.cpp, OpenAI-compatible, vLLM, SGLang, recordings."""
