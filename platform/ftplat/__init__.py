"""ftplat: fine-tuning and hyperparameter search for Hugging Face models on Ray."""

__version__ = "0.1.0"
