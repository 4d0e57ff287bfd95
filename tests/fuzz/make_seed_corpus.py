#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (tests/fuzz/corpus/<target>/) from the project's own inputs.

Run from the repository root after a config or format changes; the output is committed.
generate_request seeds are encoded with protoc (Debian's protobuf-compiler).
"""
import os
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fuzz" / "corpus"


def write(target, name, data):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    # config_json: first byte 0 device, 1 model, 2 cluster, 3 server.
    for kind, folder in ((0, "devices"), (1, "models"), (2, "clusters")):
        for f in sorted((ROOT / "configs" / folder).glob("*.json")):
            write("config_json", f"{folder}-{f.stem}", bytes([kind]) + f.read_bytes())
    write("config_json", "server-deploy", bytes([3]) + (ROOT / "deploy/server.json").read_bytes())
    write("config_json", "server-empty", bytes([3]) + b"{}")
    for name in ("alexnet", "vgg8", "resnet50"):
        write("cnn_graph", name, (ROOT / "configs/cnn" / f"{name}.json").read_bytes())
    write("dataset_tsv", "basic", "input_toks\toutput_toks\n93\t131\n96\t42\n0\t5\n3000\t1\n")
    write("dataset_tsv", "crlf-bom", "\ufeffinput_toks\toutput_toks\r\n10\t20\r\n")
    write("trace", "csv", b"\0" + b"arrival_s,prompt_tokens,output_tokens\n0.5,10,20\n0.1,5,7\n")
    write("trace", "csv-id", b"\0" + b"id,arrival_s,prompt_tokens,output_tokens\n7,0,10,20\n")
    write("trace", "jsonl",
          b"\1" + b'{"arrival_s": 0.25, "prompt_tokens": 12, "output_tokens": 30}\n'
          b'{"id": 3, "arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n')
    write("batch_csv", "channels", "seq_len,ch_idx\n512,0\n1024,3\n")
    write("batch_csv", "policy", "seq_len\n128\n2048\n")
    requests = {
        "text": 'text: "Hello, PIM" max_new_tokens: 16 seed: 7',
        "ids": "token_ids { ids: [1, 2, 255] } max_new_tokens: 4 ignore_eos: true",
        "length": 'request_id: "r1" model: "gpt3-7b" prompt_length: 512 max_new_tokens: 128 '
                  "priority: 2",
        "too-long": "prompt_length: 2000 max_new_tokens: 100",
    }
    proto = ROOT / "proto"
    for name, text in requests.items():
        encoded = subprocess.run(
            ["protoc", f"--proto_path={proto}", "--encode=neupims.v1.GenerateRequest",
             "neupims/v1/llm_service.proto"], input=text.encode(), capture_output=True, check=True)
        write("generate_request", name, encoded.stdout)


if __name__ == "__main__":
    main()
