"""The Hugging Face Hub: listings through `huggingface_hub`, resumable verified downloads, their queue and
guards."""
