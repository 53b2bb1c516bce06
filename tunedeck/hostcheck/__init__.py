"""The machine, checked before anything is installed: OS, Python, disk, GPUs and the torch build they can run.

Standard library only (Python 3.10 and newer, older than the one tunedeck needs), so that
`scripts/check_host.py` can say what is wrong before a single package is downloaded. After
install, `tunedeck env` and the checks before training ask the same modules whether the
installed torch can use the GPUs the machine has.
"""
