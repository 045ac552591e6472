"""What `traceql solve` reads: a folder of profiles (``traceql.collectors.profile_format``) and a cluster file."""

from traceql.tuning.profiles import Profiles, read_cluster, read_profile, read_profiles

__all__ = ["Profiles", "read_cluster", "read_profile", "read_profiles"]
