"""Writing results: files (atomically, in the user's file mode); later HTML and Perfetto exports."""
