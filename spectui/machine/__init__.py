"""This machine: setup (build and fetch), launching servers, GPU and host probes, doctor."""
