"""rematlab.checkpoint_plan never changes what a model computes. Models written the ways ML
engineers write them: blocks chained one into the next; a head that reads every block's output
(dense-prediction heads, Hugging Face's output_hidden_states); Hugging Face-style blocks that take
the mask as a keyword and return a tuple whose other elements the model reads. Under every plan
kind (per-block, every:K, segments:K, sqrt, modules:GLOB) one training step gives the unplanned
model's loss and gradients bit for bit, and so does a forward without gradients. A model that
calls a segment's blocks out of order, on something other than the previous block's hidden state,
or with other arguments, that changes a returned hidden state in place, drops a segment's layer or
exits before a segment's end, or checkpoints its layers itself is refused with that reason. BatchNorm's
running statistics change once a step under every plan (a recompute puts them back), as unplanned,
and checkpoint_plan says so in a warning. Exits 77 (skipped) without torch."""
import argparse
import copy
import sys
import warnings

from e2e_common import check, exit_code, torch_or_skip

ap = argparse.ArgumentParser()
ap.add_argument("--source-dir", required=True)
args = ap.parse_args()
torch = torch_or_skip(args.source_dir)
import rematlab  # noqa: E402

torch.set_num_threads(1)
D = 16
PLANS = ["per-block", "every:2", "segments:2", "segments:3", "sqrt", "modules:blocks.1"]


class Block(torch.nn.Module):
    """A pre-norm residual MLP block; `scale` as a keyword; returns (hidden, aux) with tuple=True."""

    def __init__(self, tuple_out=False):
        super().__init__()
        self.norm, self.up, self.down = torch.nn.LayerNorm(D), torch.nn.Linear(D, 2 * D), torch.nn.Linear(2 * D, D)
        self.tuple_out = tuple_out

    def forward(self, x, attention_mask=None, scale=1.0):
        h = self.up(self.norm(x))
        if attention_mask is not None:
            h = h * attention_mask
        y = x + scale * self.down(torch.nn.functional.gelu(h))
        return (y, h.sum(-1)) if self.tuple_out else y


class Chained(torch.nn.Module):
    def __init__(self, n=5, tuple_out=False):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(tuple_out) for _ in range(n))
        self.head = torch.nn.Linear(D, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x).pow(2).mean()


class EveryOutput(Chained):
    """The head reads every block's output (a dense-prediction head, output_hidden_states)."""

    def forward(self, x):
        hidden = []
        for b in self.blocks:
            x = b(x)
            hidden.append(x)
        return sum(self.head(h).pow(2).mean() * (i + 1) for i, h in enumerate(hidden))


class HfStyle(Chained):
    """Blocks take the mask as a keyword and return (hidden_states, aux); the model reads aux."""

    def __init__(self):
        super().__init__(tuple_out=True)

    def forward(self, x):
        mask = (torch.arange(2 * D) % 3 != 0).float()
        aux = []
        for b in self.blocks:
            out = b(x, attention_mask=mask)
            x = out[0]
            aux.append(out[1])
        return self.head(x).pow(2).mean() + sum(a.pow(2).mean() for a in aux) * 1e-3


class BnBlock(torch.nn.Module):
    """A residual block with BatchNorm (running statistics updated by its forward in training)."""

    def __init__(self):
        super().__init__()
        self.lin, self.bn = torch.nn.Linear(D, D), torch.nn.BatchNorm1d(D)

    def forward(self, x):
        return x + torch.relu(self.bn(self.lin(x).transpose(1, 2)).transpose(1, 2))


class WithBatchNorm(Chained):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(BnBlock() for _ in range(5))


class BasicBlock(torch.nn.Module):
    """A ResNet basic block: two 3x3 convolutions with BatchNorm and the identity shortcut."""

    def __init__(self, c):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c)
        self.conv2, self.bn2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))


class ResNet(torch.nn.Module):
    """Written as torchvision writes ResNet: a stem, then its blocks in an nn.Sequential."""

    def __init__(self, c=4, n=4):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, c, 3, padding=1), torch.nn.BatchNorm2d(c), torch.nn.ReLU())
        self.layer1 = torch.nn.Sequential(*(BasicBlock(c) for _ in range(n)))
        self.fc = torch.nn.Linear(c, 3)

    def forward(self, x):
        return self.fc(self.layer1(self.stem(x)).mean((2, 3))).pow(2).mean()


class OutOfOrder(Chained):
    def forward(self, x):
        order = [1, 0, 2, 3, 4]
        for i in order:
            x = self.blocks[i](x)
        return self.head(x).pow(2).mean()


class NotChained(Chained):
    """Each block reads the input, not the block before (a sum of branches)."""

    def forward(self, x):
        return sum(self.head(b(x)).pow(2).mean() for b in self.blocks)


class DropsALayer(Chained):
    """Layer dropping (BART's layerdrop) or an early exit: block 1 is skipped."""

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            if i != 1:
                x = b(x)
        return self.head(x).pow(2).mean()


class ExitsEarly(Chained):
    def forward(self, x):
        for b in self.blocks[:4]:
            x = b(x)
        return self.head(x).pow(2).mean()


class InPlace(Chained):
    def forward(self, x):
        for b in self.blocks:
            x = b(x)
            x.mul_(0.5)
        return self.head(x).pow(2).mean()


class KeywordHidden(Chained):
    """The hidden state passed by keyword, as some Hugging Face models call their layers."""

    def __init__(self):
        super().__init__(tuple_out=True)

    def forward(self, x):
        mask = (torch.arange(2 * D) % 2 == 0).float()
        for b in self.blocks:
            x = b(x=x, attention_mask=mask)[0]
        return self.head(x).pow(2).mean()


class OtherArguments(Chained):
    def forward(self, x):
        for i, b in enumerate(self.blocks):
            x = b(x, scale=1.0 / (i + 1))
        return self.head(x).pow(2).mean()


def step(model, plan, x):
    """One step's loss, a forward without gradients after it, and the gradients and buffers
    (BatchNorm's running statistics, updated once by the step's forward)."""
    model = copy.deepcopy(model)
    if plan is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BatchNorm's: checked in main
            rematlab.checkpoint_plan(model, plan)
    loss = model(x)
    loss.backward()
    state = [p.grad for p in model.parameters()] + [b.clone() for b in model.buffers()]
    model.eval()
    with torch.no_grad():
        again = model(x)
    return loss.detach(), again, state


def same(name, plan, a, b):
    (la, ea, ga), (lb, eb, gb) = a, b
    check(torch.equal(la, lb), "%s %s: the unplanned loss bit for bit (%r, %r)" % (name, plan, la.item(), lb.item()))
    check(torch.equal(ea, eb), "%s %s: a forward without gradients as unplanned" % (name, plan))
    differ = [i for i, (p, q) in enumerate(zip(ga, gb)) if p is None or q is None or not torch.equal(p, q)]
    check(not differ, "%s %s: every gradient and buffer bit for bit (%d of %d differ)" % (name, plan, len(differ), len(ga)))


def refused(name, model, plan, x, words, after=0):
    """A step under `plan` is refused naming `words`, after `after` steps that run (a model that
    leaves a segment's last blocks uncalled is refused at the next step)."""
    model = copy.deepcopy(model)
    rematlab.checkpoint_plan(model, plan)
    for _ in range(after):
        model(x).backward()
    try:
        model(x).backward()
    except RuntimeError as e:
        msg = str(e)
        check(all(w in msg for w in words), "%s %s: refused naming %r: %s" % (name, plan, words, msg))
        return
    check(False, "%s %s: refused" % (name, plan))


def main():
    torch.manual_seed(3)
    x = torch.randn(2, 7, D)
    for name, cls in (("chained", Chained), ("every-output", EveryOutput), ("hf-style", HfStyle),
                      ("keyword-hidden", KeywordHidden), ("other-arguments", OtherArguments),
                      ("batchnorm", WithBatchNorm)):
        model = cls()
        base = step(model, None, x)
        for plan in PLANS:
            if name == "other-arguments" and plan.startswith(("segments", "sqrt")):
                continue  # refused below
            same(name, plan, step(model, plan, x), base)
    # BatchNorm: its running statistics change once a step (above); the plan says so.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rematlab.checkpoint_plan(WithBatchNorm(), "per-block")
    check(any("blocks.0.bn" in str(w.message) and "running statistics" in str(w.message) for w in caught),
          "checkpoint_plan warns of BatchNorm's buffers: %r" % [str(w.message) for w in caught])
    # Blocks in an nn.Sequential (torchvision's ResNet): the stem (three classes) is not them.
    resnet, img = ResNet(), torch.randn(2, 3, 8, 8)
    base = step(resnet, None, img)
    for plan in ("per-block", "segments:2", "sqrt", "every:2"):
        same("resnet", plan, step(resnet, plan, img), base)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        planned = copy.deepcopy(resnet)
        rematlab.checkpoint_plan(planned, "per-block")
    check(all("forward" in b.__dict__ for b in planned.layer1) and "forward" not in planned.stem.__dict__,
          "per-block checkpoints layer1's blocks, not the stem")
    # Segments the model does not run as a chain: refused, whatever the plan would have computed.
    refused("out-of-order", OutOfOrder(), "segments:2", x, ["'segments:2'", "blocks.1", "without blocks.0"])
    refused("not-chained", NotChained(), "segments:2", x,
            ["blocks.1", "something other than the hidden state blocks.0 returned"])
    refused("other-arguments", OtherArguments(), "segments:2", x, ["blocks.1", "other arguments than blocks.0"])
    refused("other-arguments", OtherArguments(), "sqrt", x, ["'sqrt'", "other arguments"])
    refused("drops-a-layer", DropsALayer(), "segments:2", x, ["blocks.2", "out of order (after blocks.0)"])
    refused("in-place", InPlace(), "segments:2", x, ["blocks.1", "changed in place"])
    # The last blocks skipped: refused at the next segment's (or the next step's) first block.
    refused("exits-early", ExitsEarly(), "segments:2", x, ["blocks.4", "did not call it after blocks.3"], after=1)
    # After a refusal, evaluation without gradients runs every block.
    m = copy.deepcopy(DropsALayer())
    rematlab.checkpoint_plan(m, "segments:2")
    try:
        m(x)
    except RuntimeError:
        pass
    with torch.no_grad():
        check(torch.equal(m(x), copy.deepcopy(m)(x)), "after a refusal, a forward without gradients runs as unplanned")
    # Moving a model replaces its buffers: the running statistics are still restored.
    bn_model = WithBatchNorm()
    planned, plain = copy.deepcopy(bn_model), copy.deepcopy(bn_model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rematlab.checkpoint_plan(planned, "per-block")
    planned.double()
    plain.double()
    planned(x.double()).backward()
    plain(x.double()).backward()
    check(all(torch.equal(a, b) for a, b in zip(planned.buffers(), plain.buffers())),
          "BatchNorm's statistics once a step after the model moved (.double())")
    # transformers' own checkpointing around the blocks: refused when the plan is applied.
    hf = Chained()
    hf.gradient_checkpointing = True
    try:
        rematlab.checkpoint_plan(hf, "per-block")
        check(False, "a model with gradient_checkpointing on is refused")
    except ValueError as e:
        check("gradient_checkpointing_enable()" in str(e), "gradient checkpointing named: %s" % e)
    # One block at a time runs them as the model calls them.
    for name, cls in (("out-of-order", OutOfOrder), ("not-chained", NotChained)):
        model = cls()
        same(name, "per-block", step(model, "per-block", x), step(model, None, x))
    print("models checked: chained, every-output, hf-style, keyword-hidden, other-arguments, batchnorm under %s; "
          "resnet; refusals: out of order, not chained, other arguments, a dropped layer, an early exit, in place, "
          "nested checkpointing" % ", ".join(PLANS))
    return exit_code("checkpoint plans compute what the model computes")


if __name__ == "__main__":
    sys.exit(main())
