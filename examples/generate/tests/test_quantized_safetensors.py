"""Python's safetensors reads the quantized model written by fp8_generate: dtypes, shapes, scales, and
FP8 codes that decode (E4M3, by hand: numpy has no FP8 type) to the checkpoint's weights.

Usage: test_quantized_safetensors.py FP8_TRAINER FP8_GENERATE TEXT_FILE
Needs the pip packages safetensors and numpy; without them the test exits 77, which ctest reports as
skipped (with the reason printed), never as passed.
"""
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

SKIPPED = 77


def decode_e4m3(codes, np):
    """E4M3 (OCP, 'fn'): 1 sign, 4 exponent (bias 7), 3 mantissa bits; 0x7F/0xFF are NaN."""
    codes = codes.astype(np.int32)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> 3) & 0xF
    mantissa = codes & 0x7
    normal = (1.0 + mantissa / 8.0) * np.exp2(exponent - 7.0)
    subnormal = (mantissa / 8.0) * np.exp2(-6.0)
    value = sign * np.where(exponent == 0, subnormal, normal)
    return np.where((codes & 0x7F) == 0x7F, np.nan, value)


def bf16_round(x, np):
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return rounded.astype(np.uint32).view(np.float32)


def main() -> int:
    trainer, generate, text = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        import numpy as np
        from safetensors import safe_open
    except ImportError as error:
        print(f"SKIPPED: {error}; install with: pip install safetensors numpy")
        return SKIPPED

    failures = []

    def expect(condition, message):
        if not condition:
            failures.append(message)

    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory)
        subprocess.run([trainer, "--data", text, "--precision", "bf16", "--steps", "5", "--context", "16",
                        "--d-model", "16", "--layers", "1", "--heads", "2", "--hidden", "32", "--batch", "2",
                        "--eval-batches", "1", "--threads", "1", "--no-progress", "--out", str(out)],
                       check=True, capture_output=True)
        checkpoint = out / "final.safetensors"
        with safe_open(str(checkpoint), framework="numpy") as handle:
            master = {name[len("params/"):]: handle.get_tensor(name) for name in handle.keys() if name.startswith("params/")}

        for weights, activations, kv in [("fp8-channel", "static", "fp8"), ("fp8-tensor", "dynamic", "bf16")]:
            path = out / f"{weights}-{activations}-{kv}.safetensors"
            subprocess.run([generate, "--checkpoint", str(checkpoint), "--data", text, "--batch", "2",
                            "--calibration-batches", "1", "--eval-batches", "0", "--weights", weights,
                            "--activations", activations, "--kv-cache", kv, "--save", str(path), "--threads", "1"],
                           check=True, capture_output=True)
            with safe_open(str(path), framework="numpy") as handle:
                metadata = handle.metadata()
                names = set(handle.keys())
                dtypes = {name: handle.get_slice(name).get_dtype() for name in names}
                shapes = {name: list(handle.get_slice(name).get_shape()) for name in names}
                floats = {name: handle.get_tensor(name) for name in names if dtypes[name] == "F32"}
            raw = path.read_bytes()
            header_length = struct.unpack("<Q", raw[:8])[0]
            header = json.loads(raw[8:8 + header_length])
            data = raw[8 + header_length:]

            def codes_of(name):
                begin, end = header[name]["data_offsets"]
                return np.frombuffer(data[begin:end], dtype=np.uint8).reshape(header[name]["shape"])

            tag = f"[{weights}/{activations}/{kv}]"
            expect(metadata.get("format") == "fp8-generate-quantized", f"{tag} format metadata {metadata.get('format')}")
            expect(metadata.get("quant.weights") == weights, f"{tag} quant.weights")
            expect(metadata.get("model.d_model") == "16", f"{tag} model.d_model")
            expect(dtypes["wte"] == "BF16" and shapes["wte"] == [256, 16], f"{tag} wte is BF16 [256, 16]")
            expect(dtypes["lm_head"] == "BF16", f"{tag} lm_head stays BF16")
            for linear, shape in [("wqkv", [48, 16]), ("wo", [16, 16]), ("w_gate_up", [64, 16]), ("w_down", [16, 32])]:
                name = f"blocks.0.{linear}"
                expect(dtypes[name] == "F8_E4M3", f"{tag} {name} dtype {dtypes[name]}")
                expect(shapes[name] == shape, f"{tag} {name} shape {shapes[name]}")
                scales = floats[f"{name}.weight_scale_inv"]
                expect(scales.shape == ((shape[0],) if weights == "fp8-channel" else (1,)), f"{tag} {name} scale shape")
                expect(bool(np.all(scales > 0)), f"{tag} {name} scales positive")
                w = bf16_round(master[name], np)
                decoded = decode_e4m3(codes_of(name), np) * scales.reshape(-1, 1)
                # E4M3: half an ulp is 2^-4 of a normal value; subnormals are 2^-9 apart (times the scale).
                bound = np.abs(w) / 16.0 + (2.0 ** -10) * scales.reshape(-1, 1) * 1.0001
                expect(bool(np.all(np.abs(decoded - w) <= bound)), f"{tag} {name} decodes to the checkpoint weight")
                # The row (or tensor) amax maps to the largest E4M3 value, 448.
                top = np.abs(decode_e4m3(codes_of(name), np))
                expect(float(top.max()) == 448.0, f"{tag} {name} uses the full E4M3 range")
                has_input = f"{name}.input_scale_inv" in names
                expect(has_input == (activations == "static"), f"{tag} {name}.input_scale_inv present iff static")
            has_kv = "blocks.0.k_cache_scale_inv" in names
            expect(has_kv == (kv == "fp8"), f"{tag} KV-cache scales present iff fp8")
            if has_kv:
                expect(floats["blocks.0.k_cache_scale_inv"].shape == (2,), f"{tag} one key scale per head")
    for message in failures:
        print("FAILED:", message)
    print("checked the quantized safetensors of two configurations")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
