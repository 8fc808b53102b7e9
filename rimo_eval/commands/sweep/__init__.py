"""rimo-eval sweep: a model sweep as a Slurm job array, each task an experiment that comes home."""
