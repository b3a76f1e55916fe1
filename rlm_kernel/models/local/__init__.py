"""The embedded local model: its weights (``weights``) and its llama.cpp server
(``server``), so rlm-kernel works with no API key and no network."""
