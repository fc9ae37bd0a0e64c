"""JAX counterpart of bench_conv: forward + backward (both kernels' gradients) of conv 1->32 3x3
SAME + relu + max pool 2, conv 32->64 3x3 SAME + relu + max pool 2, loss = sum of the output, on
a (64, 28, 28, 1) float32 batch, as jax.jit(jax.value_and_grad(loss)) with
lax.conv_general_dilated and lax.reduce_window max pooling, in two layouts: NHWC/HWIO
(cnn_step_nhwc) and NCHW/OIHW (cnn_step_nchw). The inputs are bench_conv's formulas; the loss is
checked against NumPy. Median of 11 runs after a warm-up call.
"""
from jax_timing import check, jax, jnp, median_ms, np, report, start

lax = jax.lax


def inputs(batch):
    n, h, w = np.meshgrid(np.arange(batch), np.arange(28), np.arange(28), indexing="ij")
    x = (((n * 131 + h * 71 + w * 17) % 1000).astype(np.float32) / 500.0 - 1.0)[:, None]

    def kernel(o, i, scale):
        a, b, kh, kw = np.meshgrid(np.arange(o), np.arange(i), np.arange(3), np.arange(3),
                                   indexing="ij")
        k = ((a * 37 + b * 11 + kh * 5 + kw * 3) % 97).astype(np.float32) / 97.0 - 0.5
        return (k * np.float32(scale)).astype(np.float32)
    return x, kernel(32, 1, 0.6), kernel(64, 32, 0.1)  # NCHW, OIHW


def make_loss(layout):
    dn = ("NHWC", "HWIO", "NHWC") if layout == "nhwc" else ("NCHW", "OIHW", "NCHW")
    window = (1, 2, 2, 1) if layout == "nhwc" else (1, 1, 2, 2)

    def layer(h, w):
        h = jax.nn.relu(lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=dn))
        return lax.reduce_window(h, -jnp.inf, lax.max, window, window, "VALID")

    def loss(ws, x):
        return jnp.sum(layer(layer(x, ws[0]), ws[1]))
    return loss


def numpy_loss(x, w1, w2):
    def layer(h, w):  # NCHW, OIHW, SAME 3x3: nine shifted products
        p = np.pad(h, ((0, 0), (0, 0), (1, 1), (1, 1)))
        s = h.shape[2]
        out = sum(np.einsum("nihw,oi->nohw", p[:, :, i:i + s, j:j + s], w[:, :, i, j])
                  for i in range(3) for j in range(3))
        out = np.maximum(out, 0)
        return out.reshape(out.shape[0], out.shape[1], s // 2, 2, s // 2, 2).max((3, 5))
    return layer(layer(x.astype(np.float64), w1), w2).sum()


def main():
    args = start(batch=64, reps=11)
    x, w1, w2 = inputs(args.batch)
    want = numpy_loss(x, w1, w2)
    nhwc = (jnp.asarray(x.transpose(0, 2, 3, 1)),
            [jnp.asarray(w.transpose(2, 3, 1, 0)) for w in (w1, w2)])
    for layout, (xd, ws) in (("nhwc", nhwc), ("nchw", (jnp.asarray(x), [jnp.asarray(w1), jnp.asarray(w2)]))):
        step = jax.jit(jax.value_and_grad(make_loss(layout)))
        check(f"{layout} loss", step(ws, xd)[0], want, 1e-4)
        report(f"cnn_step_{layout}", median_ms(lambda: step(ws, xd), args.reps))


if __name__ == "__main__":
    main()
