"""Teams inside the heterogeneity-aware policy (issue #42): the quotas are rows of the
inner policy's own allocation, so it still chooses GPU types by relative speed and still
space-shares, within each team's bounds; admit-then-pin (``enforce: pin``) could not."""

from __future__ import annotations

import dataclasses

import pytest

from lyra_ray.model import Allocation, ClusterSnapshot, JobSpec, JobStatus, JobView, Node
from lyra_ray.model.team_bounds import TeamBounds
from lyra_ray.model.teams import parse_teams
from lyra_ray.model.throughput import catalogue_throughputs
from lyra_ray.model.types import ThroughputModel
from lyra_ray.policies.base import available_policies, get_policy
from lyra_ray.policies.teams import TeamPolicy, with_teams
from lyra_ray.policies.teams.admission import QUOTA
from lyra_ray.policies.teams.fit import sizes, uses

FAST = {"v100": 4.0, "k80": 1.0}
"""A job four times faster on a V100 than on a K80."""
FLAT = {"v100": 1.2, "k80": 1.0}
"""A job that gains little from a V100."""


def view(name: str, user: str, rates: dict[str, float], arrival: float) -> JobView:
    spec = JobSpec(
        name=name, total_steps=1e6, min_workers=1, max_workers=1, user=user,
        throughput=rates, arrival_s=arrival,
    )  # fmt: skip
    return JobView(
        id=name, spec=spec, arrival_s=arrival, status=JobStatus.QUEUED, steps_done=0.0,
        attained_service_s=0.0, time_received_s={}, throughput=dict(rates), current=None,
    )  # fmt: skip


def nodes(**types: int) -> tuple[Node, ...]:
    return tuple(Node(f"{g}-{i}", g, 1) for g, n in types.items() for i in range(n))


def two_teams_and_a_crowd() -> ClusterSnapshot:
    """Teams a and b, each guaranteed half of 4 V100s and 4 K80s, each with three slow-
    insensitive jobs (arrived first) and three V100-hungry ones; four V100-hungry jobs of
    a user in no team. Every GPU is somebody's guarantee, so the quotas bind."""
    jobs = []
    for t in ("a", "b"):
        jobs += [view(f"{t}-flat{i}", t, FLAT, float(i)) for i in range(3)]
        jobs += [view(f"{t}-fast{i}", t, FAST, 10.0 + i) for i in range(3)]
    jobs += [view(f"d{i}", "carol", FAST, 20.0 + i) for i in range(4)]
    return ClusterSnapshot(
        now=100.0, nodes=nodes(v100=4, k80=4), jobs=tuple(jobs), throughput_model=ThroughputModel()
    )


HALVES = {
    "teams": {"a": {"quota": "v100=2,k80=2"}, "b": {"quota": "v100=2,k80=2"}},
    "users": {"a": "a", "b": "b"},
}


def held(alloc: Allocation, snap: ClusterSnapshot, team: str, bounds: TeamBounds) -> float:
    return sum(bounds.tally(uses(alloc, sizes(snap))).get(team, {}).values())


@pytest.mark.parametrize(
    "name",
    ["max_min_fairness_perf", "max_min_fairness_water_filling_perf", "finish_time_fairness_perf"],
)
def test_limited_teams_still_place_jobs_by_relative_speed_on_several_types(name: str) -> None:
    snap = two_teams_and_a_crowd()
    teams = parse_teams(HALVES, "t")
    pol = with_teams(get_policy(name), teams)
    got = pol.allocate(snap)
    bounds = pol.last.bounds
    assert bounds is not None and pol.last.rows  # the quotas bound: rows joined the LP
    assert not bounds.violated(bounds.tally(uses(got, sizes(snap))))
    x = got.fractions
    for t in ("a", "b"):
        assert held(got, snap, t, bounds) == pytest.approx(4.0, abs=1e-3)  # its guarantee
        fast = [x[f"{t}-fast{i}"] for i in range(3)]
        flat = [x[f"{t}-flat{i}"] for i in range(3)]
        # the V100 goes to the jobs it speeds up most, the K80 to the others ...
        assert min(f["v100"] for f in fast) > max(f["v100"] for f in flat) + 0.2
        assert min(f["k80"] for f in flat) > max(f["k80"] for f in fast) + 0.2
    # ... and jobs still spread over more than one type
    assert any(min(row.values()) > 0.05 for row in x.values())
    # admit-then-pin gives a type per job by arrival: the V100-hungry jobs land on K80s
    pinned = with_teams(get_policy(name), dataclasses.replace(teams, enforce="pin"))
    px = pinned.allocate(snap).fractions
    assert any(px.get(f"a-fast{i}", {}).get("k80", 0.0) > 0.99 for i in range(3))
    assert all(max(row.values()) > 0.99 or max(row.values()) < 0.01 for row in px.values())


def test_a_team_with_no_guarantee_gets_only_what_the_guarantees_leave() -> None:
    """Max-min over every job would lift the unguaranteed crowd at the guaranteed teams'
    expense; the floor rows give each team what its jobs claim."""
    snap = two_teams_and_a_crowd()
    pol = with_teams(get_policy("max_min_fairness_perf"), parse_teams(HALVES, "t"))
    got = pol.allocate(snap)
    assert pol.last.bounds is not None
    assert held(got, snap, "default", pol.last.bounds) == pytest.approx(0.0, abs=1e-6)
    reasons = pol.waiting(snap, got)  # derived when asked, not carried in the answer
    assert not got.waiting
    assert {j for j, (code, _) in reasons.items() if code == QUOTA} == {f"d{i}" for i in range(4)}


def packed_snapshot() -> ClusterSnapshot:
    """Catalogue jobs (measured pair throughputs) of teams a, b and c on 3 V100 + 3 K80."""
    cat = catalogue_throughputs()
    kinds = {
        "a": ("resnet18", "lm", "recommendation", "a3c"),
        "b": ("resnet18", "lm", "recommendation", "a3c"),
        "c": ("transformer", "cyclegan", "resnet50", "bert"),
    }
    jobs = []
    for t, types in kinds.items():
        for jt in types:
            spec = JobSpec(
                name=f"{t}-{jt}", total_steps=1e6, min_workers=1, max_workers=1, user=t,
                job_type=jt, arrival_s=float(len(jobs)),
            )  # fmt: skip
            rates = {g: cat.throughput(spec, g, 1) for g in ("v100", "k80")}
            jobs.append(
                JobView(
                    id=spec.name,
                    spec=spec,
                    arrival_s=spec.arrival_s,
                    status=JobStatus.QUEUED,
                    steps_done=0.0,
                    attained_service_s=0.0,
                    time_received_s={},
                    throughput=rates,
                    current=None,
                )
            )
    return ClusterSnapshot(
        now=100.0, nodes=nodes(v100=3, k80=3), jobs=tuple(jobs), throughput_model=cat
    )


def pairs(alloc: Allocation) -> dict[str, dict[str, float]]:
    return {
        k: {g: v for g, v in row.items() if v > 1e-4}
        for k, row in alloc.fractions.items()
        if "+" in k and any(v > 1e-4 for v in row.values())
    }


@pytest.mark.parametrize(
    "name", ["max_min_fairness_packed", "max_min_fairness_water_filling_packed"]
)
def test_limited_teams_still_space_share_across_the_pairs_chosen_without_teams(name: str) -> None:
    snap = packed_snapshot()
    teams = parse_teams(
        {
            "teams": {"a": {"quota": "v100=1,k80=1"}, "b": {"quota": "v100=1,k80=1"}},
            "users": {"a": "a", "b": "b"},
        },
        "t",
    )
    free = pairs(get_policy(name).allocate(snap))
    pol = with_teams(get_policy(name), teams)
    got = pol.allocate(snap)
    assert pol.last.bounds is not None and pol.last.rows  # the quotas bound
    assert not pol.last.bounds.violated(pol.last.bounds.tally(uses(got, sizes(snap))))
    inside = pairs(got)
    time_in = sum(v for row in inside.values() for v in row.values())
    time_free = sum(v for row in free.values() for v in row.values())
    assert time_in >= 0.8 * time_free  # as much sharing as without teams
    assert {g for row in inside.values() for g in row} == {"v100", "k80"}  # on both types
    same = set(inside) & set(free)
    assert len(same) >= 3  # largely the pairs it chose without teams
    assert any(k.startswith("a-") and "+c-" in k for k in same)  # across teams, too
    pinned = with_teams(get_policy(name), dataclasses.replace(teams, enforce="pin"))
    assert len(pairs(pinned.allocate(snap))) < len(inside)  # pinning loses pairs


def no_v100_cluster(n_jobs: int) -> ClusterSnapshot:
    """6 A100s and 2 H200s (no V100 anywhere); one team's one-GPU jobs run 2x faster on
    an H200 than on an A100."""
    jobs = tuple(
        view(f"j{i}", "alice", {"a100": 1.0, "h200": 2.0}, float(i)) for i in range(n_jobs)
    )
    return ClusterSnapshot(
        now=0.0, nodes=nodes(a100=6, h200=2), jobs=jobs, throughput_model=ThroughputModel()
    )


def units(alloc: Allocation, per_gpu: dict[str, float]) -> float:
    return sum(n * per_gpu[g] for g, n in alloc.workers.values())


@pytest.mark.parametrize("inner", ["lyra", "fifo_nonpreemptive"])
def test_on_a_cluster_without_v100s_an_effective_quota_means_the_reference_types_throughput(
    inner: str,
) -> None:
    """4 effective is 4 GPUs' worth of the reference type's throughput: by default the
    cluster's most common type (A100 here): 4 A100s, or 2 H200s, or a mix."""
    raw = {"teams": {"a": {"quota_effective": 4, "borrow_limit": 0}}, "users": {"alice": "a"}}
    teams = parse_teams(raw, "t", {"a100": 6, "h200": 2})
    assert teams.reference_for({"a100": 6, "h200": 2}) == "a100"
    pol = TeamPolicy(get_policy(inner), teams)
    got = pol.allocate(no_v100_cluster(8))
    assert units(got, {"a100": 1.0, "h200": 2.0}) == pytest.approx(4.0)
    waiting = pol.waiting(no_v100_cluster(8), got)  # the rest wait for the quota
    assert len(got.workers) < 8 and {c for c, _ in waiting.values()} == {QUOTA}
    # the reference set to the H200: 4 effective is 4 H200s' worth (8 A100s')
    h200 = parse_teams({**raw, "reference": "h200"}, "t", {"a100": 6, "h200": 2})
    got = TeamPolicy(get_policy(inner), h200).allocate(no_v100_cluster(10))
    assert units(got, {"a100": 0.5, "h200": 1.0}) == pytest.approx(4.0)


def test_effective_lending_limit_keeps_the_rest_of_an_idle_guarantee() -> None:
    """Team a (4 reference units, lends at most 1) is idle: b may borrow 1, not 4."""
    jobs = [view(f"b{i}", "bob", {"v100": 1.0}, float(i)) for i in range(8)]
    snap = ClusterSnapshot(
        now=0.0, nodes=nodes(v100=8), jobs=tuple(jobs), throughput_model=ThroughputModel()
    )
    raw = {
        "teams": {"a": {"quota_effective": 4, "lend_limit": 1}, "b": {"quota_effective": 4}},
        "users": {"alice": "a", "bob": "b"},
    }
    got = TeamPolicy(get_policy("fifo_nonpreemptive"), parse_teams(raw, "t")).allocate(snap)
    assert sum(n for _, n in got.workers.values()) == 5  # b's 4 and 1 of a's


def test_an_oversubscribed_effective_set_is_refused_with_the_capacity_rule() -> None:
    with pytest.raises(Exception, match=r"effective quotas sum to 10"):
        parse_teams(
            {"teams": {"a": {"quota_effective": 6}, "b": {"quota_effective": 4}}},
            "t",
            {"v100": 8},
            effective_capacity=8.0,
        )


LOOSE = {
    "teams": {"all": {"quota": "v100=1", "borrow_limit": 1_000_000}},
    "users": {"alice": "all", "bob": "all", "carol": "all", "default": "all"},
}
"""One limited team holding every job, guaranteed one V100, borrowing without bound: its
rows are built and checked at every decision and never bind."""


@pytest.mark.parametrize("name", sorted(available_policies()))
def test_rows_that_do_not_bind_leave_every_policys_answer_alone(name: str) -> None:
    from tests.unit.teams_helpers import catalogue, cluster, job

    jobs = [
        job(f"j{i}", u, lo, hi, arrival=float(i), job_type=jt)
        for i, (u, lo, hi, jt) in enumerate(
            [
                ("alice", 1, 1, "resnet18"),
                ("bob", 2, 2, "resnet50"),
                ("carol", 1, 4, "resnet18"),
                ("alice", 4, 4, "transformer"),
                ("bob", 1, 1, "lm"),
            ]
        )
    ]
    snap = cluster(jobs, v100=4, k80=4, model=catalogue())
    wrapped = TeamPolicy(get_policy(name), parse_teams(LOOSE, "t"))
    got = wrapped.allocate(snap)
    plain = get_policy(name).allocate(
        dataclasses.replace(snap, jobs=tuple(
            dataclasses.replace(j, spec=dataclasses.replace(j.spec, user="all")) for j in jobs
        ))
    )  # fmt: skip
    assert wrapped.last.bounds is not None and not wrapped.last.rows and wrapped.last.solves == 1
    assert dataclasses.replace(got, waiting={}) == dataclasses.replace(plain, waiting={})


@pytest.mark.parametrize("name", ["fifo", "gandiva", "isolated", "allox", "fifo_packed"])
def test_a_policy_that_takes_no_bounds_is_cut_to_them(name: str) -> None:
    """Closed-form splits and Gavel's agnostic FIFO read no rows: their answer is cut
    (fractions scaled where a row is broken; a split over ``Problem.runnable`` already
    leaves out the teams the bounds shut), and then breaks none."""
    snap = two_teams_and_a_crowd()
    pol = with_teams(get_policy(name), parse_teams(HALVES, "t"))
    got = pol.allocate(snap)
    bounds = pol.last.bounds
    assert bounds is not None
    assert not bounds.violated(bounds.tally(uses(got, sizes(snap))), floors=False)
    plain = get_policy(name).allocate(snap)
    if bounds.violated(bounds.tally(uses(plain, sizes(snap))), floors=False):
        assert pol.last.rows and got != plain  # it had to be asked again, or cut


def test_a_worker_answer_that_ignores_the_bounds_keeps_minimums_oldest_first() -> None:
    """The last resort for worker counts: running jobs oldest start first, every minimum
    before any flexible worker, what fits kept (policies/teams/fit.py)."""
    from lyra_ray.policies.teams.bounds import claim, pool_capacity
    from lyra_ray.policies.teams.fit import fit
    from tests.unit.teams_helpers import cluster, job

    teams = parse_teams(
        {
            "teams": {"a": {"quota": "v100=4"}, "b": {"quota": "v100=4"}},
            "users": {"a": "a", "b": "b"},
        },
        "t",
    )
    jobs = [
        job("ea", "a", 1, 8, running=6, started=0.0),
        job("ra1", "a", 2, running=2, started=10.0),
        job("b1", "b", 2, arrival=50.0),
    ]
    snap = cluster(jobs, v100=8)
    greedy = Allocation(workers={"ea": ("v100", 6), "ra1": ("v100", 2), "b1": ("v100", 2)})
    bounds = claim(snap, teams).bounds(pool_capacity(snap))
    cut = fit(greedy, snap, bounds)
    assert cut.workers == {"ea": ("v100", 4), "ra1": ("v100", 2), "b1": ("v100", 2)}
