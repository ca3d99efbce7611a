"""Turn SmolLM2's GGUF into the Hugging Face folder vLLM serves (run with the vLLM environment's Python).

vLLM on a CPU cannot serve a GGUF directly, so: transformers (with the gguf package) loads the GGUF,
its state dict is copied into a plain LlamaForCausalLM built from the same config minus the
quantization config, cast to bfloat16, and saved with the tokenizer. Same text as the GGUF model.
    python gguf_to_hf.py MODEL.gguf OUT_DIR
"""

import os
import sys
from pathlib import Path


def main(gguf: str, out: str) -> None:
    import torch  # lazy: torch and transformers (the training extra), only for a conversion
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM  # lazy: as torch

    folder, name = str(Path(gguf).parent), Path(gguf).name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    src = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.torch_dtype = "bfloat16"
    model = LlamaForCausalLM(config)
    model.load_state_dict(src.state_dict(), strict=False)
    model = model.to(torch.bfloat16)
    tmp = Path(out + ".part")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    os.replace(tmp, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
