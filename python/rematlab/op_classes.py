"""Op classes of selective checkpoint plans (`selective:keep=CLASS[,CLASS]`, docs/own-model.md):
the one list of the aten ops each class holds. A recording writes it into summary.json
(`recorded.op_classes`), so the predictor of rematlab-batch classifies a run's ops by the list
that recorded it. Names are aten schema names: the ops a dispatch mode sees (mm, addmm, bmm, ...)
and the composite ones the profiler shows at the top (linear, matmul)."""

OP_CLASSES = {
    "matmul": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"),
    "sdpa": ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
             "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_efficient_attention",
             "aten::_scaled_dot_product_cudnn_attention", "aten::_flash_attention_forward",
             "aten::_efficient_attention_forward"),
    "conv": ("aten::convolution", "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d",
             "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d"),
}

_CLASS_OF = {op: cls for cls, ops in OP_CLASSES.items() for op in ops}


def class_of(op_name):
    """The class of aten op `op_name` ("aten::addmm"), "" when it is in none."""
    return _CLASS_OF.get(op_name, "")


def ops_of(classes):
    """The aten op names of the classes `classes` (each a key of OP_CLASSES)."""
    return {op for c in classes for op in OP_CLASSES[c]}
