"""Many cards and many servers: what each host's NPU network is (facts), the checks across
hosts before a launch (checks), the HCCL rank table (ranktable), the per-node launch
(launch) and the Kubernetes jobs for the engines sites already run (k8s)."""
