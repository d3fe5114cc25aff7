"""The schedulers a simulated GPU node can belong to: Slurm's scontrol and squeue, and kubectl.

Only what draining a node around a change uses, with the real commands' words and exit codes.
The node's scheduler state is in /.sim/cluster.json: who drained it and why, and its running jobs
(pods), each of which ends a number of seconds after the node is drained, as jobs finish once
no new ones can start. Kept apart from simhost/, whose files the CUDA runfile of the sim carries.
"""
