"""Python's safetensors reads a checkpoint written by fp8_trainer: every tensor, dtype and shape.

Usage: test_safetensors_python.py FP8_TRAINER TEXT_FILE
Needs the pip packages safetensors and numpy; without them the test exits 77, which ctest reports as
skipped (with the reason printed), never as passed.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

SKIPPED = 77


def main() -> int:
    trainer, text = sys.argv[1], sys.argv[2]
    try:
        import numpy as np
        from safetensors import safe_open
        from safetensors.numpy import load_file
    except ImportError as error:
        print(f"SKIPPED: {error}; install with: pip install safetensors numpy")
        return SKIPPED

    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory)
        subprocess.run([trainer, "--data", text, "--precision", "fp8", "--steps", "3", "--context", "16",
                        "--d-model", "16", "--layers", "1", "--heads", "2", "--hidden", "32", "--batch", "2",
                        "--eval-batches", "1", "--threads", "1", "--no-progress", "--out", str(out)],
                       check=True, capture_output=True)
        path = out / "final.safetensors"
        tensors = load_file(str(path))
        with safe_open(str(path), framework="numpy") as handle:
            metadata = handle.metadata()

    failures = []

    def expect(condition, message):
        if not condition:
            failures.append(message)

    expect(metadata.get("format") == "fp8-trainer-checkpoint", f"format metadata: {metadata.get('format')}")
    expect(metadata.get("model.d_model") == "16", f"model.d_model metadata: {metadata.get('model.d_model')}")
    expect(tensors["params/wte"].shape == (256, 16) and tensors["params/wte"].dtype == np.float32, "params/wte")
    expect(tensors["params/blocks.0.wqkv"].shape == (48, 16), "params/blocks.0.wqkv")
    expect(tensors["adam_v/lm_head"].shape == (256, 16), "adam_v/lm_head")
    expect(tensors["train/step"].dtype == np.int64 and int(tensors["train/step"][0]) == 3, "train/step")
    expect(tensors["rng/data_epoch"].dtype == np.uint64 and tensors["rng/data_epoch"].shape == (4,), "rng/data_epoch")
    expect(bytes(tensors["scaling/state"][:8]) == b"FP8SCALE", "scaling/state magic")
    expect(all(np.isfinite(tensors[name]).all() for name in tensors if name.startswith("params/")), "finite weights")
    for message in failures:
        print("FAILED:", message)
    print(f"read {len(tensors)} tensors and {len(metadata)} metadata entries")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
