"""The opt-in RIMO-P judge: an LLM grades each sub-solution (upstream's protocol), never primary."""
