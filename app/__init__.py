"""Roofline: run LLMs locally with llama.cpp and see why they are fast or slow."""

__version__ = "0.1.0"
