"""The in-process llama.cpp transport."""
