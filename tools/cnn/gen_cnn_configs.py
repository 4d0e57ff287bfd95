#!/usr/bin/env python3
"""Writes the CNN graph configs configs/cnn/*.json (models/cnn/graph.h describes the schema).

The generated files are checked in and are the source of truth; this script only saves typing
the ~500 layers of ResNet-152. Each network follows the Caffe deploy prototxt named in its
`source` field layer for layer (same names, same order, same hyper-parameters); Caffe's in-place
layers (ReLU, BatchNorm, Scale, Dropout) become layers of their own, each producing the tensor
named after it.

Usage: tools/cnn/gen_cnn_configs.py [--out configs/cnn]
"""

import argparse
import json
import os


class Net:
    """Collects layers; every helper returns the name of the tensor it produced."""

    def __init__(self, name, source, input_shape):
        self.name = name
        self.source = source
        self.input_shape = input_shape
        self.layers = []

    def add(self, name, type_, bottom, **fields):
        layer = {"name": name, "type": type_,
                 "bottom": bottom if isinstance(bottom, list) else [bottom]}
        layer.update(fields)
        self.layers.append(layer)
        return name

    def conv(self, name, bottom, num_output, kernel, stride=1, pad=0, bias=True, group=1):
        fields = {"num_output": num_output, "kernel": kernel}
        if stride != 1:
            fields["stride"] = stride
        if pad != 0:
            fields["pad"] = pad
        if group != 1:
            fields["group"] = group
        if not bias:
            fields["bias"] = False
        return self.add(name, "Convolution", bottom, **fields)

    def pool(self, name, bottom, method, kernel, stride, pad=0):
        fields = {"pool": method, "kernel": kernel, "stride": stride}
        if pad != 0:
            fields["pad"] = pad
        return self.add(name, "Pooling", bottom, **fields)

    def fc(self, name, bottom, num_output, bias=True):
        fields = {"num_output": num_output}
        if not bias:
            fields["bias"] = False
        return self.add(name, "InnerProduct", bottom, **fields)

    def relu(self, name, bottom):
        return self.add(name, "ReLU", bottom)

    def lrn(self, name, bottom):
        # BVLC AlexNet / GoogLeNet: local_size 5, alpha 1e-4, beta 0.75.
        return self.add(name, "LRN", bottom, local_size=5, alpha=0.0001, beta=0.75)

    def dropout(self, name, bottom, ratio):
        return self.add(name, "Dropout", bottom, ratio=ratio)

    def to_json(self):
        lines = ["{",
                 f'  "name": {json.dumps(self.name)},',
                 f'  "source": {json.dumps(self.source)},',
                 '  "batch": 1,',
                 f'  "input": {{"name": "data", "shape": {json.dumps(self.input_shape)}}},',
                 '  "layers": [']
        body = [f"    {json.dumps(layer)}" for layer in self.layers]
        lines.append(",\n".join(body))
        lines += ["  ]", "}", ""]
        return "\n".join(lines)


def vgg(name, convs_per_stage):
    net = Net(name, f"Simonyan & Zisserman, ICLR 2015; Caffe deploy prototxt VGG_ILSVRC_"
                    f"{name[3:]}_layers_deploy.prototxt (Caffe Model Zoo); 3x224x224, batch 1",
              [3, 224, 224])
    top = "data"
    widths = [64, 128, 256, 512, 512]
    for stage, (width, count) in enumerate(zip(widths, convs_per_stage), start=1):
        for i in range(1, count + 1):
            top = net.conv(f"conv{stage}_{i}", top, width, 3, pad=1)
            top = net.relu(f"relu{stage}_{i}", top)
        top = net.pool(f"pool{stage}", top, "max", 2, 2)
    for i, width in ((6, 4096), (7, 4096)):
        top = net.fc(f"fc{i}", top, width)
        top = net.relu(f"relu{i}", top)
        top = net.dropout(f"drop{i}", top, 0.5)
    top = net.fc("fc8", top, 1000)
    net.add("prob", "Softmax", top)
    return net


def conv_bn(net, suffix, bottom, num_output, kernel, stride=1, pad=0, relu=True):
    """ResNet's conv -> BatchNorm -> Scale (-> ReLU), names as in Kaiming He's prototxts."""
    top = net.conv(f"res{suffix}", bottom, num_output, kernel, stride=stride, pad=pad, bias=False)
    top = net.add(f"bn{suffix}", "BatchNorm", top)
    top = net.add(f"scale{suffix}", "Scale", top)
    if relu:
        top = net.relu(f"res{suffix}_relu", top)
    return top


def bottleneck(net, block, bottom, width, stride, projection):
    if projection:
        shortcut = conv_bn(net, f"{block}_branch1", bottom, 4 * width, 1, stride=stride,
                           relu=False)
    else:
        shortcut = bottom
    # Caffe ResNet v1: the stride sits on the first 1x1 convolution (branch2a).
    top = conv_bn(net, f"{block}_branch2a", bottom, width, 1, stride=stride)
    top = conv_bn(net, f"{block}_branch2b", top, width, 3, pad=1)
    top = conv_bn(net, f"{block}_branch2c", top, 4 * width, 1, relu=False)
    top = net.add(f"res{block}", "Eltwise", [shortcut, top])
    return net.relu(f"res{block}_relu", top)


def block_names(stage, count, deep):
    """a, b, c, ... (ResNet-50) or a, b1, b2, ... (ResNet-101/152, stages 3 and 4)."""
    if deep and count > 3:
        return [f"{stage}a"] + [f"{stage}b{i}" for i in range(1, count)]
    return [f"{stage}{chr(ord('a') + i)}" for i in range(count)]


def resnet(name, blocks):
    depth = name[len("resnet"):]
    net = Net(name, f"He et al., CVPR 2016; Caffe deploy prototxt ResNet-{depth}-deploy.prototxt "
                    "(github.com/KaimingHe/deep-residual-networks); 3x224x224, batch 1",
              [3, 224, 224])
    top = net.conv("conv1", "data", 64, 7, stride=2, pad=3, bias=False)
    top = net.add("bn_conv1", "BatchNorm", top)
    top = net.add("scale_conv1", "Scale", top)
    top = net.relu("conv1_relu", top)
    top = net.pool("pool1", top, "max", 3, 2)  # Caffe ceil rounding: 112 -> 56
    for stage, (width, count) in enumerate(zip([64, 128, 256, 512], blocks), start=2):
        for i, block in enumerate(block_names(stage, count, deep=depth != "50")):
            stride = 2 if i == 0 and stage > 2 else 1
            top = bottleneck(net, block, top, width, stride, projection=i == 0)
    top = net.pool("pool5", top, "ave", 7, 1)
    top = net.fc("fc1000", top, 1000)
    net.add("prob", "Softmax", top)
    return net


def inception(net, module, bottom, c1, c3r, c3, c5r, c5, proj):
    p = f"inception_{module}"
    a = net.relu(f"{p}/relu_1x1", net.conv(f"{p}/1x1", bottom, c1, 1))
    b = net.relu(f"{p}/relu_3x3_reduce", net.conv(f"{p}/3x3_reduce", bottom, c3r, 1))
    b = net.relu(f"{p}/relu_3x3", net.conv(f"{p}/3x3", b, c3, 3, pad=1))
    c = net.relu(f"{p}/relu_5x5_reduce", net.conv(f"{p}/5x5_reduce", bottom, c5r, 1))
    c = net.relu(f"{p}/relu_5x5", net.conv(f"{p}/5x5", c, c5, 5, pad=2))
    d = net.pool(f"{p}/pool", bottom, "max", 3, 1, pad=1)
    d = net.relu(f"{p}/relu_pool_proj", net.conv(f"{p}/pool_proj", d, proj, 1))
    return net.add(f"{p}/output", "Concat", [a, b, c, d])


def googlenet():
    net = Net("googlenet", "Szegedy et al., CVPR 2015; BVLC GoogLeNet deploy.prototxt "
                           "(caffe/models/bvlc_googlenet), auxiliary classifiers omitted as in "
                           "deploy; 3x224x224, batch 1", [3, 224, 224])
    top = net.conv("conv1/7x7_s2", "data", 64, 7, stride=2, pad=3)
    top = net.relu("conv1/relu_7x7", top)
    top = net.pool("pool1/3x3_s2", top, "max", 3, 2)
    top = net.lrn("pool1/norm1", top)
    top = net.relu("conv2/relu_3x3_reduce", net.conv("conv2/3x3_reduce", top, 64, 1))
    top = net.relu("conv2/relu_3x3", net.conv("conv2/3x3", top, 192, 3, pad=1))
    top = net.lrn("conv2/norm2", top)
    top = net.pool("pool2/3x3_s2", top, "max", 3, 2)
    top = inception(net, "3a", top, 64, 96, 128, 16, 32, 32)
    top = inception(net, "3b", top, 128, 128, 192, 32, 96, 64)
    top = net.pool("pool3/3x3_s2", top, "max", 3, 2)
    top = inception(net, "4a", top, 192, 96, 208, 16, 48, 64)
    top = inception(net, "4b", top, 160, 112, 224, 24, 64, 64)
    top = inception(net, "4c", top, 128, 128, 256, 24, 64, 64)
    top = inception(net, "4d", top, 112, 144, 288, 32, 64, 64)
    top = inception(net, "4e", top, 256, 160, 320, 32, 128, 128)
    top = net.pool("pool4/3x3_s2", top, "max", 3, 2)
    top = inception(net, "5a", top, 256, 160, 320, 32, 128, 128)
    top = inception(net, "5b", top, 384, 192, 384, 48, 128, 128)
    top = net.pool("pool5/7x7_s1", top, "ave", 7, 1)
    top = net.dropout("pool5/drop_7x7_s1", top, 0.4)
    top = net.fc("loss3/classifier", top, 1000)
    net.add("prob", "Softmax", top)
    return net


def alexnet():
    net = Net("alexnet", "Krizhevsky et al., NIPS 2012; BVLC AlexNet deploy.prototxt "
                         "(caffe/models/bvlc_alexnet): 3x227x227 input as in Caffe (not 224), "
                         "groups 2 in conv2/4/5, LRN before pooling; batch 1", [3, 227, 227])
    top = net.relu("relu1", net.conv("conv1", "data", 96, 11, stride=4))
    top = net.pool("pool1", net.lrn("norm1", top), "max", 3, 2)
    top = net.relu("relu2", net.conv("conv2", top, 256, 5, pad=2, group=2))
    top = net.pool("pool2", net.lrn("norm2", top), "max", 3, 2)
    top = net.relu("relu3", net.conv("conv3", top, 384, 3, pad=1))
    top = net.relu("relu4", net.conv("conv4", top, 384, 3, pad=1, group=2))
    top = net.relu("relu5", net.conv("conv5", top, 256, 3, pad=1, group=2))
    top = net.pool("pool5", top, "max", 3, 2)
    for i in (6, 7):
        top = net.dropout(f"drop{i}", net.relu(f"relu{i}", net.fc(f"fc{i}", top, 4096)), 0.5)
    top = net.fc("fc8", top, 1000)
    net.add("prob", "Softmax", top)
    return net


def vgg8():
    net = Net("vgg8", "NeuroSim's VGG8 for CIFAR-10: neurosim/DNN_NeuroSim_V1.3 "
                      "Inference_pytorch/models/VGG.py (cfg 'vgg8', QConv2d/QLinear without "
                      "bias, 'same' padding, 2x2/2 max pooling, classifier 8192-1024-10); "
                      "3x32x32, batch 1", [3, 32, 32])
    top = "data"
    index = 0
    for stage, width in enumerate([128, 256, 512], start=1):
        for _ in range(2):
            index += 1
            top = net.relu(f"relu{index}", net.conv(f"conv{index}", top, width, 3, pad=1,
                                                    bias=False))
        top = net.pool(f"pool{stage}", top, "max", 2, 2)
    top = net.relu("relu7", net.fc("fc1", top, 1024, bias=False))
    net.fc("fc2", top, 10, bias=False)
    return net


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(root, "configs", "cnn"))
    args = parser.parse_args()
    nets = [vgg("vgg16", [2, 2, 3, 3, 3]), vgg("vgg19", [2, 2, 4, 4, 4]),
            resnet("resnet50", [3, 4, 6, 3]), resnet("resnet152", [3, 8, 36, 3]),
            googlenet(), alexnet(), vgg8()]
    os.makedirs(args.out, exist_ok=True)
    for net in nets:
        with open(os.path.join(args.out, f"{net.name}.json"), "w") as f:
            f.write(net.to_json())


if __name__ == "__main__":
    main()
