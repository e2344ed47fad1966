"""`train-ddp`: training with DistributedDataParallel over several processes, timed from rank 0.

pytest-benchmark times rounds in the pytest process, so that process is rank 0. It starts the other
ranks as worker processes (`python -c ...`, never a fork: CUDA cannot be forked), and every rank builds
the same module (same seed, so DDP's initial broadcast changes nothing) with its own inputs (seeded by
rank, as a data loader with a distributed sampler would give), wraps it in DistributedDataParallel
(nccl with one GPU per rank on CUDA, gloo on the CPU) and composes the same step as `train`
(`perfsuite.run.steps.make_train_step`).

Workers loop on a command from rank 0: before each of its steps rank 0 broadcasts "step", so one timed
round on rank 0 is one DDP step of every rank (the gradient all-reduce keeps them in lockstep). `close()`
broadcasts "stop", joins the workers (killing any that do not exit in time) and destroys the process
group. A worker that fails writes its error to the rendezvous store and exits; rank 0 raises
`DistributedWorkerError` naming the rank and the error, and never waits forever: collectives have a
timeout, worker liveness is watched, and on nccl a dead worker aborts the communicator.

The pure functions at the top decide how many processes run, whether a case can run here, and the
scaling efficiency of the results.
"""
