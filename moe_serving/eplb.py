"""DeepSeek's EPLB (expert-parallel load balancer), re-implemented as the baseline to beat.

The published algorithm (deepseek-ai/EPLB, ``rebalance_experts``), written here from its
description and kept in the same structure — torch tensors on the CPU, replication vectorised
over layers, balanced packing as a Python loop per layer — so that its planning time is
representative of the reference:

1. replication: repeatedly give one more replica to the expert with the highest
   load-per-replica;
2. balanced packing: items in decreasing weight, each to the lightest pack that still has
   room (every pack gets exactly ``items / packs`` items);
3. hierarchical: pack expert groups onto nodes first (so a group's traffic stays in a node),
   replicate within each node, then pack the node's replicas onto its GPUs. The global policy
   is the hierarchical one with a single group on a single node.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from lyra_ray.moe_serving.planner import Loads, Placement, check_shape


def balanced_packing(weight: Tensor, packs: int) -> tuple[Tensor, Tensor]:
    """Pack ``weight`` [L, n] items into ``packs`` packs of n/packs items each.

    Returns (pack of each item [L, n], rank of the item inside its pack [L, n]).
    """
    layers, items = weight.shape
    per_pack = items // packs
    if per_pack == 1:
        ar = torch.arange(items, dtype=torch.int64).expand(layers, items).clone()
        return ar, torch.zeros_like(ar)
    order = weight.float().sort(-1, descending=True).indices
    pack_of = torch.full((layers, items), -1, dtype=torch.int64)
    rank_of = torch.full((layers, items), -1, dtype=torch.int64)
    for i in range(layers):
        pack_w = [0.0] * packs
        pack_n = [0] * packs
        for item in order[i].tolist():
            pack = min((p for p in range(packs) if pack_n[p] < per_pack), key=pack_w.__getitem__)
            pack_of[i, item] = pack
            rank_of[i, item] = pack_n[pack]
            pack_w[pack] += float(weight[i, item])
            pack_n[pack] += 1
    return pack_of, rank_of


def replicate(weight: Tensor, physical: int) -> tuple[Tensor, Tensor]:
    """Replica -> expert map [L, physical] and replica counts [L, n] (greedy by load/count)."""
    layers, logical = weight.shape
    phy2log = torch.arange(physical, dtype=torch.int64).repeat(layers, 1)
    count = torch.ones(layers, logical, dtype=torch.int64)
    rows = torch.arange(layers)
    for i in range(logical, physical):
        pick = (weight / count).max(dim=-1).indices
        phy2log[:, i] = pick
        count[rows, pick] += 1
    return phy2log, count


def _inverse(perm: Tensor) -> Tensor:
    inv = torch.empty_like(perm)
    inv.scatter_(1, perm, torch.arange(perm.size(1), dtype=torch.int64).expand(perm.shape))
    return inv


def rebalance(weight: Tensor, physical: int, groups: int, nodes: int, gpus: int) -> Tensor:
    """Hierarchical EPLB; returns the expert of every physical slot [L, physical].

    Physical slot p lives on GPU ``p // (physical // gpus)``.
    """
    layers, logical = weight.shape
    group_size = logical // groups
    groups_per_node = groups // nodes
    per_node_log = logical // nodes
    # 1. groups -> nodes
    group_w = weight.view(layers, groups, group_size).sum(-1)
    gpack, grank = balanced_packing(group_w, nodes)
    log2mlog = (
        ((gpack * groups_per_node + grank) * group_size).unsqueeze(-1)
        + torch.arange(group_size, dtype=torch.int64)
    ).flatten(-2)
    mlog2log = _inverse(log2mlog)
    # 2. replicas within each node
    mlog_w = weight.gather(-1, mlog2log).view(-1, per_node_log)
    phy2mlog, mcount = replicate(mlog_w, physical // nodes)
    # 3. node replicas -> GPUs of the node
    phy_w = (mlog_w / mcount).gather(-1, phy2mlog)
    pack, rank = balanced_packing(phy_w, gpus // nodes)
    pphy2phy = _inverse(pack * (physical // gpus) + rank)
    pphy2mlog = phy2mlog.gather(-1, pphy2phy)
    offsets = torch.arange(0, logical, per_node_log, dtype=torch.int64).view(1, -1, 1)
    pphy2mlog = (pphy2mlog.view(layers, nodes, -1) + offsets).flatten(-2)
    return mlog2log.gather(-1, pphy2mlog)


def plan_eplb(
    load: Loads, replicas: int, devices: int, groups: int = 1, nodes: int = 1
) -> Placement:
    """EPLB as a ``Placement``; ``groups = nodes = 1`` is the global policy."""
    check_shape(load, replicas, devices, -(-replicas // devices))
    experts = load.shape[1]
    if replicas % devices:
        raise ValueError(f"EPLB needs replicas ({replicas}) divisible by gpus ({devices})")
    if experts % groups or groups % nodes or devices % nodes:
        raise ValueError(
            f"EPLB hierarchical needs experts ({experts}) % groups ({groups}) == 0, "
            f"groups % nodes ({nodes}) == 0 and gpus ({devices}) % nodes == 0"
        )
    if replicas % nodes or (replicas // nodes) < experts // nodes:
        raise ValueError(f"replicas ({replicas}) must split evenly over nodes ({nodes})")
    phy2log = rebalance(torch.from_numpy(load.astype(np.float64)), replicas, groups, nodes, devices)
    rexp = phy2log.numpy().astype(np.int64)
    per_gpu = replicas // devices
    rdev = np.broadcast_to(np.arange(replicas) // per_gpu, rexp.shape).copy()
    return Placement(rexp, rdev, devices, per_gpu, load.astype(np.float64))
