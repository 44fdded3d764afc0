#!/usr/bin/env python3
"""The PyTorch BF16 peer of bench_trainer: the trainer's transformer (byte embedding, RMSNorm, causal
attention with rotate-half RoPE, SwiGLU, LM head, AdamW with FP32 master weights) in PyTorch with
torch.compile and BF16 autocast, timed the same way: tokens/s and model TFLOP/s of full training
steps on random bytes.

Usage:
  torch_peer.py [--d-model 4096] [--hidden 14336] [--heads 32] [--context 2048] [--layers 4]
                [--batch 2] [--passes 1] [--warmup 3] [--steps 10] [--no-compile] [--out DIR]

--passes P: gradient accumulation, as bench_trainer's: every optimizer step runs P forward/backward
passes of --batch sequences, each with its own tokens and its loss scaled by 1/P (so that the
gradients are the mean over the passes), then clips and updates once. Steps are optimizer steps;
tokens/s count the tokens of all P passes.

The model TFLOP/s count the same FLOPs as bench_trainer (6 per linear parameter per token plus 12 T C
per token and block for attention's two products in full), although PyTorch's fused attention
(scaled_dot_product_attention, flash) skips the masked half. Needs PyTorch with CUDA.
"""
import argparse
import math
import sys
import time
from pathlib import Path

import result_files as rf

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch_peer.py: PyTorch is not installed (pip install torch); this peer needs it with CUDA")


def positive(text):
    """A whole number above zero, for argparse (--passes: a count, where 0 would time nothing)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expects a positive whole number; got {text!r}")
    return value


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d-model", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=14336)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--context", type=int, default=2048)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--batch", type=int, default=2, help="sequences per pass")
    p.add_argument("--passes", type=positive, default=1, help="forward/backward passes per optimizer step")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--no-compile", action="store_true", help="eager mode (torch.compile off)")
    p.add_argument("--out", type=Path, help="folder for torch_peer.csv")
    return p.parse_args()


class Block(torch.nn.Module):
    def __init__(self, c, f, heads, layers):
        super().__init__()
        self.heads = heads
        self.attn_norm = torch.nn.RMSNorm(c, eps=1e-5)
        self.wqkv = torch.nn.Linear(c, 3 * c, bias=False)
        self.wo = torch.nn.Linear(c, c, bias=False)
        self.mlp_norm = torch.nn.RMSNorm(c, eps=1e-5)
        self.w_gate_up = torch.nn.Linear(c, 2 * f, bias=False)
        self.w_down = torch.nn.Linear(f, c, bias=False)
        for w in (self.wqkv, self.w_gate_up):
            torch.nn.init.normal_(w.weight, std=0.02)
        for w in (self.wo, self.w_down):  # projections into the residual stream, as the trainer
            torch.nn.init.normal_(w.weight, std=0.02 / math.sqrt(2 * layers))

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.wqkv(self.attn_norm(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(y.transpose(1, 2).reshape(b, t, c))
        gate, up = self.w_gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.w_down(F.silu(gate) * up)


def rotate(x, cos, sin):
    """Rotate-half RoPE: pairs (i, i + D/2), as the trainer's rope.hpp."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class Transformer(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = torch.nn.Embedding(a.vocab, a.d_model)
        torch.nn.init.normal_(self.wte.weight, std=0.02)
        self.blocks = torch.nn.ModuleList(Block(a.d_model, a.hidden, a.heads, a.layers) for _ in range(a.layers))
        self.final_norm = torch.nn.RMSNorm(a.d_model, eps=1e-5)
        self.lm_head = torch.nn.Linear(a.d_model, a.vocab, bias=False)
        torch.nn.init.normal_(self.lm_head.weight, std=0.02)
        d = a.d_model // a.heads
        inv = 1.0 / (10000.0 ** (torch.arange(0, d // 2, dtype=torch.float64) * 2 / d))
        angles = torch.arange(a.context, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, tokens, targets):
        x = self.wte(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        logits = self.lm_head(self.final_norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def flops_per_token(a):
    linear = a.layers * (4 * a.d_model**2 + 3 * a.d_model * a.hidden) + a.vocab * a.d_model
    return 6 * linear + 12 * a.layers * a.context * a.d_model


def main():
    a = parse()
    if not torch.cuda.is_available():
        sys.exit("torch_peer.py: PyTorch sees no CUDA device (torch.cuda.is_available() is False)")
    torch.manual_seed(1)
    model = Transformer(a).cuda()
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                                  lr=1e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    tokens = torch.randint(0, a.vocab, (a.passes, a.batch, a.context + 1), device="cuda")
    batches = [(t[:, :-1].contiguous(), t[:, 1:].contiguous()) for t in tokens]

    def step(m):
        """One optimizer step of a.passes passes; returns their mean loss (a tensor: no host wait)."""
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for inputs, targets in batches:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = m(inputs, targets)
            (loss / a.passes).backward()  # backward() adds into .grad: the mean over the passes
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return total / a.passes

    compiled = not a.no_compile
    compile_failed = False
    runner = torch.compile(model) if compiled else model

    def warm_up():
        begin = time.perf_counter()
        for _ in range(a.warmup):
            step(runner)
        torch.cuda.synchronize()
        # The first step compiles (forward and backward graphs): said apart, so a slow compile shows.
        print(f"torch_peer: {a.warmup} warm-up steps in {time.perf_counter() - begin:.1f} s"
              f"{' (torch.compile included)' if compiled else ''}", flush=True)

    try:
        warm_up()
    except Exception as error:  # a failed compile (Inductor, Triton) must not cost the peer's figure
        if not compiled:
            raise
        print(f"torch_peer: torch.compile failed ({type(error).__name__}: {error}); timing eager mode "
              "instead (and exiting 1)", file=sys.stderr, flush=True)
        compiled, compile_failed, runner = False, True, model
        warm_up()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step(runner)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / a.steps
    step_tokens = a.passes * a.batch * a.context
    tokens_per_s = step_tokens / seconds
    tflops = flops_per_token(a) * tokens_per_s / 1e12
    params = sum(p.numel() for p in model.parameters())
    mode = "torch.compile" if compiled else "eager"
    print(f"torch_peer: {torch.cuda.get_device_name()}, torch {torch.__version__}, {mode}, BF16 autocast; "
          f"{params} parameters, batch {a.batch} x context {a.context}, passes {a.passes} "
          f"({step_tokens} tokens per optimizer step)")
    print(f"| PyTorch BF16 ({mode}) | {tokens_per_s:.0f} tokens/s | {tflops:.1f} model TFLOP/s | "
          f"{seconds * 1e3:.1f} ms/step | loss {loss.item():.3f} |")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        # The columns of bench_trainer's speed.csv, so that trainer_results.py puts both in one table.
        (a.out / rf.TORCH_PEER).write_text(
            ",".join(rf.SPEED_HEADER) + "\n"
            f"{rf.TORCH_PEER_PREFIX}{'compile' if compiled else 'eager'},{tokens_per_s},{tflops},{seconds * 1e3},"
            f"{loss.item()},{a.passes},{step_tokens}\n")
    if compile_failed:
        sys.exit("torch_peer.py: the figures above are eager mode: torch.compile failed (see above)")


if __name__ == "__main__":
    main()
