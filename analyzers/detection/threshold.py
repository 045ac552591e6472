"""The slowdown threshold, written once: an overlapped kernel longer than this many times its baseline is a
case (the paired definition; `--threshold` changes it). Imports nothing, so the command line shows it as a
default without loading the analysis."""

PAIRED_FACTOR = 1.2
