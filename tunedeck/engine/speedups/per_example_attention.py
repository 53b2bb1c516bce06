"""Attention for packed rows that computes each example on its own, with no `T × T` mask.

The dense path of `packed_attention` hands sdpa a `(rows, 1, T, T)` block-diagonal mask:
every row pays for `T²` scores although an example only ever sees itself, and the mask itself
costs `rows · T²` bytes. Here the packed batch arrives flattened into one row with the example
boundaries (`cu_seq_lens_q`, the same inputs the flash-attention varlen kernel takes), and
attention runs per example:

* examples are grouped by length (lengths within a factor `GROUP_GROWTH` of one another share a
  group), each group gathered into a `(examples, heads, L, head_dim)` batch padded at the end to
  its longest member `L`, and sdpa runs once per group with `is_causal=True`;
* padding at the end is exact, not approximate: under a causal mask a real token only sees
  keys at or before it, so the padded keys after an example's end are never attended to, and
  the padded queries' outputs are dropped (their gradient is zero);
* one gather puts every real token's output back in its place.

The work is the sum over groups of `examples · L²` instead of `rows · T²`, and no mask exists.
The grouping plan depends only on the boundaries, so it is built once per forward pass (all
layers, and the recomputation of gradient checkpointing, reuse it).

The function is registered with transformers' `AttentionInterface` under
`PER_EXAMPLE_ATTENTION`, together with a mask function that builds no mask for inputs
without a padding mask. Inputs without boundaries (a 4D mask from the dense collator, a
padded batch, generation) go to transformers' own sdpa function unchanged, so a model set to
this implementation behaves like sdpa everywhere else. A row with boundaries is never handed
to plain sdpa: what this path cannot reproduce (logit soft-capping, attention sinks, a sliding
window shorter than an example) raises, and the selection's check then keeps the dense mask.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

PER_EXAMPLE_ATTENTION = "tunedeck_per_example_sdpa"
# Lengths up to this factor apart share one sdpa call: fewer calls against a little padding.
GROUP_GROWTH = 1.5


@dataclass(frozen=True)
class SegmentGroup:
    """Examples of similar length, gathered into one padded batch."""

    token_index: Any  # long tensor (examples · length,): the packed token each padded slot reads
    examples: int
    length: int


@dataclass(frozen=True)
class SegmentPlan:
    """How one packed row is split into groups and put back together."""

    groups: tuple[SegmentGroup, ...]
    # long tensor (tokens,): row of the concatenated padded group outputs holding each token's output
    output_index: Any
    tokens: int


def group_lengths(lengths: list[int], growth: float = GROUP_GROWTH) -> list[list[int]]:
    """Example indices grouped so that each group's lengths lie within a factor `growth` of its shortest.

    Sorting and cutting greedily bounds the padding of each example by `growth` (its padded
    length is at most `growth` times its own) while keeping the number of groups logarithmic in
    the spread of lengths.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    for index in order:
        if groups and lengths[index] <= math.floor(lengths[groups[-1][0]] * growth):
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


def segment_plan(cu_seq_lens: Any, growth: float = GROUP_GROWTH) -> SegmentPlan:
    """The grouping plan of a packed row from its boundaries `[0, end_1, …, tokens]`."""
    import torch

    bounds = [int(b) for b in cu_seq_lens.tolist()]
    starts, lengths = bounds[:-1], [b - a for a, b in itertools.pairwise(bounds)]
    device = cu_seq_lens.device
    tokens = bounds[-1]
    groups: list[SegmentGroup] = []
    output_index = torch.empty(tokens, dtype=torch.long)
    offset = 0
    for members in group_lengths(lengths, growth):
        longest = max(lengths[i] for i in members)
        member_starts = torch.tensor([starts[i] for i in members], dtype=torch.long)
        member_lengths = torch.tensor([lengths[i] for i in members], dtype=torch.long)
        steps = torch.arange(longest, dtype=torch.long)
        # Padded slots past an example's end read its last token: finite values that a causal
        # query of that example never attends to.
        clamped = torch.minimum(steps[None, :], (member_lengths - 1)[:, None])
        token_index = member_starts[:, None] + clamped
        real = steps[None, :] < member_lengths[:, None]
        slots = offset + torch.arange(len(members) * longest, dtype=torch.long).view(len(members), longest)
        output_index[token_index[real]] = slots[real]
        groups.append(SegmentGroup(token_index.reshape(-1).to(device), len(members), longest))
        offset += len(members) * longest
    return SegmentPlan(tuple(groups), output_index.to(device), tokens)


class PerExampleAttention:
    """The attention function (transformers' attention-interface signature) for packed rows.

    It keeps the plan of the last boundaries it saw: every layer of one forward pass gets the
    same `cu_seq_lens_q` tensor, so the plan is built once per batch.
    """

    def __init__(self) -> None:
        self._boundaries: Any = None
        self._plan: SegmentPlan | None = None

    def plan_for(self, cu_seq_lens: Any) -> SegmentPlan:
        """The plan of `cu_seq_lens`, reused while the same tensor comes back."""
        if self._plan is None or cu_seq_lens is not self._boundaries:
            self._plan = segment_plan(cu_seq_lens)
            self._boundaries = cu_seq_lens
        return self._plan

    def __call__(self, module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                 dropout: float = 0.0, scaling: float | None = None, **kwargs: Any) -> tuple[Any, None]:
        """Attention output `(1, tokens, heads, head_dim)` of a packed row, or sdpa's for other inputs."""
        import torch
        from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

        boundaries = kwargs.get("cu_seq_lens_q")
        if boundaries is None:
            return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                          scaling=scaling, **kwargs)
        plan = self.plan_for(boundaries)
        # Never hand a packed row to plain sdpa: without its boundaries examples would see one another.
        _require_plain_packed_row(query, attention_mask, kwargs, max(group.length for group in plan.groups))
        groups = getattr(module, "num_key_value_groups", 1)
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
        heads = query.shape[1]
        q, k, v = query[0], key[0], value[0]  # (heads, tokens, head_dim)
        outputs = []
        for group in plan.groups:
            def gather(states: Any, group: SegmentGroup = group) -> Any:
                picked = states.index_select(1, group.token_index)
                return picked.view(states.shape[0], group.examples, group.length, states.shape[-1]).transpose(0, 1)

            out = torch.nn.functional.scaled_dot_product_attention(
                gather(q), gather(k), gather(v), dropout_p=dropout, scale=scaling, is_causal=True)
            # (examples, heads, L, d) → (examples · L, heads, d)
            outputs.append(out.transpose(1, 2).reshape(group.examples * group.length, heads, value.shape[-1]))
        merged = torch.cat(outputs) if len(outputs) > 1 else outputs[0]
        return merged.index_select(0, plan.output_index).unsqueeze(0), None


def _require_plain_packed_row(query: Any, attention_mask: Any, kwargs: dict[str, Any], longest: int) -> None:
    """Raise ValueError when the packed row asks for something per-example sdpa does not reproduce.

    The selection's exactness check runs this path on the real model first, so such a model
    goes back to the dense mask before training.
    """
    if query.shape[0] != 1 or attention_mask is not None:
        raise ValueError("per-example attention takes one flattened row with boundaries and no mask")
    unsupported = [name for name in ("softcap", "s_aux", "position_bias") if kwargs.get(name) is not None]
    if unsupported:
        raise ValueError(f"per-example attention does not apply {', '.join(unsupported)}")
    window = kwargs.get("sliding_window")
    if window is not None and longest > int(window):
        # Examples no longer than the window never reach its edge; a longer one would need it.
        raise ValueError(f"an example of {longest} tokens exceeds the sliding window of {window}")


def per_example_mask(**kwargs: Any) -> Any:
    """The mask function registered beside the attention: none without a padding mask, sdpa's otherwise.

    Packed rows carry their boundaries instead of a mask, so building one (transformers would
    build a dense block-diagonal mask from the restarting position ids) is exactly the cost
    the per-example path removes.
    """
    from transformers.masking_utils import sdpa_mask

    # transformers calls mask functions with keyword arguments only.
    if kwargs.get("attention_mask") is None:
        return None
    return sdpa_mask(**kwargs)


_REGISTERED: list[PerExampleAttention] = []


def register_per_example_attention() -> str:
    """Register the attention and mask functions with transformers (once per process); their name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    if not _REGISTERED:
        attention = PerExampleAttention()
        AttentionInterface.register(PER_EXAMPLE_ATTENTION, attention)
        AttentionMaskInterface.register(PER_EXAMPLE_ATTENTION, per_example_mask)
        _REGISTERED.append(attention)
    return PER_EXAMPLE_ATTENTION
