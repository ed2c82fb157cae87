"""``python -m gpt2_onnx`` runs the command-line interface."""

from gpt2_onnx.cli import main

if __name__ == "__main__":
    main()
