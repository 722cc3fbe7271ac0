"""Facts about llama.cpp, and nothing about nodes or plans: the engine manager, what a GGUF file
holds, llama-server's command line, running one llama-server and reading its log, and whether the
CPU's weight repacking is safe.
"""
