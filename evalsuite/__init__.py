"""evalsuite: is your speculative decoding lossless, is accuracy unchanged, and how much faster is it?"""

__version__ = "0.1.0"
