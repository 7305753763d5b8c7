"""The allocation core (pure: no Prefect, MLflow or file IO).

Entry point: :func:`optimizer.planners.plan` ``(problem, planner) -> Plan`` for planner in
``("milp", "fifo", "easy", "priority")``; every returned plan has passed
:func:`optimizer.verify.verify`.

==========================  ===============================================================
module                      what
==========================  ===============================================================
``problem``                 validated problem types (``problem.types``) and the file form (``problem.fileform``)
``plan``                    the result type, ``SolveStatus``/``PlanSource``, its JSON document
``capacity``                running GPUs per step, GPUs up, fixed occupancy, service bounds
``diagnose``                infeasibility diagnosis and model-size estimate before building
``milp``                    the full §5 MILP, one builder function per constraint family
``decomposition``           exact start/size master + block packing (the default MILP method)
``solver``                  HiGHS wrapper: outcomes, gap, fresh object per solve
``baselines``               FIFO, EASY backfill, priority backfill; greedy warm starts
``objective``               the §5 objective of any plan, independent of the MILP
``verify``                  the independent verifier (§5.2)
``examples``                seeded problem generator (benchmark, examples, tests)
``simulate``                rolling-horizon simulator: observe, forecast, plan, verify, commit, advance
``scenarios``               scenario types, workload drawing, named catalogue, real trace (a package)
``metrics``                 bench metrics on the truth
==========================  ===============================================================

Choices worth knowing:

- Real-time services in the baselines hold a static reservation of their peak demand (as a
  Slurm/Kubernetes operator would), reached within the swap cap; the MILP follows demand.
- Unmet real-time demand is a penalised slack (w = κ · max p); ``settings.demand_hard`` makes
  demand a hard constraint, and demand above capacity is then reported before solving.
- ``settings.max_wait_steps`` is EASY's reservation for the first job that has waited that
  long: later jobs may overtake it only where it has no room anyway (DESIGN §5), hard, never
  infeasible, objective unchanged; the verifier checks it on every non-baseline plan.
- The MILP is built in units of the largest priority (case F01); objectives and bounds are
  reported in the user's units.
- A job started near the horizon's end earns its in-horizon steps only; occupancy after the
  horizon is not modelled (the next replan sees it as a running job).
- Running jobs add nothing to the objective (fixed occupancy, the same in every plan).
"""
