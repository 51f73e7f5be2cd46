"""A 3x3 filter over a stack of images (the frames of a video), as a generalized ufunc.

The layout '(m,n),(3,3)->(m,n)' makes each image one gufunc element; the frames are the loop
dimension, spread over the GPU. Edges repeat the border pixel. Checked against NumPy.

    python image_filter.py
"""
import numpy as np

from cufunc import cuda, guvectorize


@guvectorize(["void(float32[:, :], float32[:, :], float32[:, :])",
              "void(float64[:, :], float64[:, :], float64[:, :])"], "(m,n),(k,k)->(m,n)")
def filter3x3(image, weights, out):
    m, n = image.shape
    for i in range(m):
        for j in range(n):
            acc = 0.0
            for di in range(3):
                ii = min(max(i + di - 1, 0), m - 1)
                for dj in range(3):
                    jj = min(max(j + dj - 1, 0), n - 1)
                    acc += weights[di, dj] * image[ii, jj]
            out[i, j] = acc


KERNELS = ["filter3x3"]
NEEDS = []

GAUSSIAN = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], np.float32) / 16
SHARPEN = np.array([[0, -1, 0], [-1, 5, -1], [0, -1, 0]], np.float32)


def reference(frames, weights):
    padded = np.pad(frames, ((0, 0), (1, 1), (1, 1)), mode="edge")
    m, n = frames.shape[1:]
    out = np.zeros_like(frames)
    for di in range(3):
        for dj in range(3):
            out += weights[di, dj] * padded[:, di:di + m, dj:dj + n]
    return out


def main(frames=512, m=64, n=96):
    rng = np.random.default_rng(1)
    video = rng.random((frames, m, n), dtype=np.float32)

    d_video = cuda.to_device(video)
    blurred = filter3x3(d_video, GAUSSIAN)          # weights broadcast over every frame
    sharp = filter3x3(blurred, SHARPEN)             # a DeviceArray in, a DeviceArray out
    assert np.allclose(blurred.copy_to_host(), reference(video, GAUSSIAN), atol=1e-5)
    assert np.allclose(sharp.copy_to_host(), reference(reference(video, GAUSSIAN), SHARPEN),
                       atol=1e-4)

    # a different filter per frame: the weights get a loop dimension too
    per_frame = np.stack([GAUSSIAN if f % 2 else SHARPEN for f in range(frames)])
    mixed = filter3x3(video, per_frame)              # NumPy in, NumPy out
    assert np.allclose(mixed[0], reference(video[:1], SHARPEN)[0], atol=1e-4)
    assert np.allclose(mixed[1], reference(video[1:2], GAUSSIAN)[0], atol=1e-5)
    print("%d frames of %dx%d filtered; mean %.4f -> %.4f" % (frames, m, n, video.mean(),
                                                             float(mixed.mean())))
    print("OK")


if __name__ == "__main__":
    main()
