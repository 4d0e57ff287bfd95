"""Acceptance of `neupims serve --cnn-model resnet50`'s KServe v2 API (docs/api.md "CNN models")
with Debian's python3-grpcio and stubs generated at run time from proto/inference by grpc_tools.

Usage: cnn_accept.py PROTO_DIR OUT_DIR FAST_TARGET CA_PEM TOKEN SLOW_TARGET
  FAST_TARGET: a fast-pacing server with TLS (CA_PEM signed its certificate for localhost) and
  the bearer token TOKEN; SLOW_TARGET: a plaintext realtime one so slow (--speed 1e-4) that no
  image finishes, for cancel and deadline. Prints one PASS/FAIL line per check; exits 1 on a FAIL.
"""
import os
import struct
import sys
import threading
import time
import traceback

import grpc
from grpc_tools import protoc

proto_dir, out_dir, fast, ca_pem, token, slow = sys.argv[1:7]
os.makedirs(out_dir, exist_ok=True)
if protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
                "inference/grpc_predict_v2.proto"]) != 0:
    sys.exit("protoc failed")
sys.path.insert(0, out_dir)
from inference import grpc_predict_v2_pb2 as pb  # noqa: E402
from inference import grpc_predict_v2_pb2_grpc as pb_grpc  # noqa: E402

results = []


def check(name):
    def run(fn):
        try:
            fn()
            results.append(("PASS", name))
        except Exception:  # noqa: BLE001 -- every failure is a FAIL line
            results.append(("FAIL", name, traceback.format_exc()[-600:]))
    return run


with open(ca_pem, "rb") as f:
    creds = grpc.ssl_channel_credentials(root_certificates=f.read())
stub = pb_grpc.GRPCInferenceServiceStub(grpc.secure_channel(fast, creds))
slow_stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(slow))
auth = (("authorization", f"Bearer {token}"),)
MODEL, C, H, W = "resnet50", 3, 224, 224


def infer_request(n=1, shape=None, datatype="FP32", name="data", raw=True):
    req = pb.ModelInferRequest(model_name=MODEL, id=f"py-{n}")
    t = req.inputs.add(name=name, datatype=datatype, shape=shape or [n, C, H, W])
    if raw:
        req.raw_input_contents.append(struct.pack(f"<{n * C * H * W}f", *([0.5] * (n * C * H * W))))
    else:
        t.contents.fp32_contents.extend([0.5] * (n * C * H * W))
    return req


def expect_error(fn, code, *words):
    try:
        fn()
    except grpc.RpcError as e:
        assert e.code() == code, f"{e.code()} {e.details()}"
        for w in words:
            assert w in e.details(), f"{w!r} not in {e.details()!r}"
        return
    raise AssertionError(f"no error, expected {code}")


@check("ServerLive / ServerReady with the token over TLS")
def _():
    assert stub.ServerLive(pb.ServerLiveRequest(), metadata=auth, timeout=10).live
    assert stub.ServerReady(pb.ServerReadyRequest(), metadata=auth, timeout=10).ready


@check("without the token: UNAUTHENTICATED, ServerLive too (documented)")
def _():
    expect_error(lambda: stub.ServerLive(pb.ServerLiveRequest(), timeout=10),
                 grpc.StatusCode.UNAUTHENTICATED, "bearer token")
    expect_error(lambda: stub.ModelInfer(infer_request(), timeout=10), grpc.StatusCode.UNAUTHENTICATED)


@check("the token as Python's access_token_call_credentials over TLS")
def _():
    with open(ca_pem, "rb") as f:
        ssl = grpc.ssl_channel_credentials(root_certificates=f.read())
    both = grpc.composite_channel_credentials(ssl, grpc.access_token_call_credentials(token))
    with grpc.secure_channel(fast, both) as channel:
        live = pb_grpc.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest(), timeout=10)
        assert live.live


@check("ModelMetadata: data FP32 [-1,3,224,224] in, prob FP32 [-1,1000] out")
def _():
    m = stub.ModelMetadata(pb.ModelMetadataRequest(name=MODEL), metadata=auth, timeout=10)
    assert m.name == MODEL and "1" in m.versions, m
    assert [(t.name, t.datatype, list(t.shape)) for t in m.inputs] == [("data", "FP32", [-1, C, H, W])], m
    assert [(t.name, t.datatype, list(t.shape)) for t in m.outputs] == [("prob", "FP32", [-1, 1000])], m


@check("ModelInfer raw FP32, batch 2: raw output 2 x 1000 of 1/1000, id and sim parameters")
def _():
    r = stub.ModelInfer(infer_request(2), metadata=auth, timeout=30)
    assert r.id == "py-2" and r.model_name == MODEL, r.id
    assert [(t.name, t.datatype, list(t.shape)) for t in r.outputs] == [("prob", "FP32", [2, 1000])]
    values = struct.unpack(f"<{2000}f", r.raw_output_contents[0])
    assert all(abs(v - 1e-3) < 1e-6 for v in values)
    for p in ("sim_latency_ns", "sim_energy_j", "partition", "images"):
        assert p in r.parameters, list(r.parameters)
    assert r.parameters["images"].int64_param == 2, r.parameters["images"]


@check("ModelInfer typed fp32_contents: typed output")
def _():
    r = stub.ModelInfer(infer_request(1, raw=False), metadata=auth, timeout=30)
    assert len(r.outputs[0].contents.fp32_contents) == 1000 and not r.raw_output_contents


@check("wrong shape / datatype / input name / element count: INVALID_ARGUMENT naming the field")
def _():
    bad = grpc.StatusCode.INVALID_ARGUMENT
    expect_error(lambda: stub.ModelInfer(infer_request(1, shape=[1, 3, 224, 225]), metadata=auth,
                                         timeout=10), bad, "shape")
    expect_error(lambda: stub.ModelInfer(infer_request(1, shape=[1, 3, 224]), metadata=auth,
                                         timeout=10), bad, "shape")
    expect_error(lambda: stub.ModelInfer(infer_request(1, datatype="FP16"), metadata=auth,
                                         timeout=10), bad, "datatype")
    expect_error(lambda: stub.ModelInfer(infer_request(1, name="input"), metadata=auth,
                                         timeout=10), bad, "name")
    short = infer_request(1)
    short.raw_input_contents[0] = short.raw_input_contents[0][:-4]
    expect_error(lambda: stub.ModelInfer(short, metadata=auth, timeout=10), bad, "raw_input_contents")
    # A batch over --cnn-max-batch (64): refused by its shape (the shape is checked before the
    # element count; 65 real images would not fit the gRPC message limit, which holds 64).
    for n in (65, 0):
        expect_error(lambda: stub.ModelInfer(infer_request(1, shape=[n, C, H, W]), metadata=auth,
                                             timeout=10), bad, "shape")


@check("unknown model: NOT_FOUND")
def _():
    req = infer_request(1)
    req.model_name = "resnet51"
    expect_error(lambda: stub.ModelInfer(req, metadata=auth, timeout=10), grpc.StatusCode.NOT_FOUND)


@check("cancel of a ModelInfer in the slow pipeline: CANCELLED locally, server goes on")
def _():
    future = slow_stub.ModelInfer.future(infer_request(1), timeout=60)
    time.sleep(0.5)
    assert not future.done(), "finished before the cancel"
    assert future.cancel()
    assert future.cancelled()
    assert slow_stub.ServerReady(pb.ServerReadyRequest(), timeout=10).ready


@check("deadline on the slow pipeline: DEADLINE_EXCEEDED")
def _():
    expect_error(lambda: slow_stub.ModelInfer(infer_request(1), timeout=0.5),
                 grpc.StatusCode.DEADLINE_EXCEEDED)


for r in results:
    print(" | ".join(r))
failed = sum(1 for r in results if r[0] == "FAIL")
print(f"{len(results) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
