"""What a user sees when a body or a layout is wrong, and what inspect_cuda() shows.

- A translation error's traceback holds the user's lines and the one frame of cufunc's entry
  point (errors.user_frames_only), not the translator's recursive frames; the message still
  points at the user's line.
- A gufunc whose layout has more operands than the function has parameters says so.
- inspect_cuda() of a function with several loops shows the shared prelude once.
No GPU needed: translation and decoration run everywhere."""
import os
import subprocess
import sys
import textwrap

import pytest

import cufunc
from cufunc import guvectorize, vectorize
from cufunc.errors import TypingError, UnsupportedError


def run_script(tmp_path, body):
    script = tmp_path / "user_script.py"      # a file: the translator reads function sources
    script.write_text(textwrap.dedent(body))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stderr


@pytest.mark.parametrize("decorator, params", [
    ("@vectorize(['float32(float32)'])", "x"),
    ("@vectorize", "x"),                                        # compiled at the first call
    ("@guvectorize(['void(float32[:], float32[:])'], '(n)->(n)')", "x, o"),
])
def test_translation_error_traceback_is_short(tmp_path, decorator, params):
    rc, err = run_script(tmp_path, """
        from cufunc import guvectorize, vectorize

        %s
        def f(%s):
            y = x + "a string"
            return y

        f(__import__("numpy").ones(4, "float32"))
        """ % (decorator, params))
    assert rc != 0
    assert "UnsupportedError: a string is not supported" in err, err
    frames = [l for l in err.splitlines() if l.strip().startswith("File ")]
    translator = [l for l in frames if os.sep + "lang" + os.sep in l]
    assert not translator, err                       # none of the translator's frames
    assert any("user_script.py" in l for l in frames), err
    # the user's decorator line, cufunc's entry point, and the body's line in the message
    assert len(frames) <= 3, err
    assert 'y = x + "a string"' in err


def test_translation_error_from_translate_itself(tmp_path):
    rc, err = run_script(tmp_path, """
        from cufunc import float64
        from cufunc.lang import translate

        def f(x):
            return x.no_such_attribute

        translate(f, [float64])
        """)
    assert rc != 0 and ("TypingError" in err or "UnsupportedError" in err), err
    frames = [l for l in err.splitlines() if l.strip().startswith("File ")]
    assert not [l for l in frames if "translator.py" in l], err
    assert len(frames) <= 3, err


def test_exception_object_is_unchanged():
    def f(x):
        return x + "s"
    with pytest.raises(UnsupportedError) as e:
        vectorize(["float64(float64)"])(f)
    # the message is the translator's, pointing at this file
    assert __file__ in str(e.value) or os.path.basename(__file__) in str(e.value)
    assert issubclass(UnsupportedError, TypeError) and issubclass(TypingError, TypeError)


@pytest.mark.parametrize("layout, params, says", [
    ("(n),(n)->()", "x, y", "takes 2 parameters but the layout (n),(n)->() has 3 operands "
                            "(2 inputs and 1 output)"),
    ("(n)->(),()", "x", "takes 1 parameter but the layout (n)->(),() has 3 operands "
                        "(1 input and 2 outputs)"),
])
def test_gufunc_layout_with_more_operands_than_parameters(tmp_path, layout, params, says):
    rc, err = run_script(tmp_path, """
        from cufunc import guvectorize

        @guvectorize('%s')
        def g(%s):
            s = 0.0
            for i in range(x.shape[0]):
                s += x[i]
        g(__import__("numpy").ones((2, 4), "float32")%s)
        """ % (layout, params, ", __import__('numpy').ones((2, 4), 'float32')" if "y" in params else ""))
    assert rc != 0
    assert says in err, err
    assert "returns void" not in err


def test_gufunc_layout_message_with_type_list():
    def g(x, y):
        s = 0.0
        for i in range(x.shape[0]):
            s += x[i]
    with pytest.raises(TypeError, match=r"takes 2 parameters but the layout \(n\),\(n\)->\(\) "
                                        r"has 3 operands"):
        guvectorize(["void(float32[:], float32[:])"], "(n),(n)->()")(g)


def _two_loops():
    def hyp(x, y):
        return (x * x + y * y) ** 0.5
    return vectorize(["float32(float32, float32)", "float64(float64, float64)"])(hyp)


def test_inspect_cuda_shows_the_prelude_once():
    src = _two_loops().inspect_cuda()
    assert src.count('#include "cufunc/runtime.cuh"') == 1
    assert src.count("#ifndef CF_LANG_PRELUDE") == 1
    assert src.count("hyp: float32(float32, float32) */") == 1
    assert src.count("hyp: float64(float64, float64) */") == 1


def test_inspect_cuda_gufunc_prelude_once_wrappers_kept():
    def rs(x):
        s = 0.0
        for i in range(x.shape[0]):
            s += x[i]
        return s
    g = guvectorize(["float32(float32[:])", "float64(float64[:])"], "(n)->()")(rs)
    src = g.inspect_cuda()
    assert src.count("#ifndef CF_LANG_PRELUDE") == 1
    assert src.count("__device__ inline void cf_gu_ret_") == 2   # one wrapper per loop


def test_merged_source_still_compiles():
    # the merged text is one valid translation unit: NVRTC compiles it (no GPU needed)
    from cufunc import _env
    core = _env.require_core("NVRTC")
    try:
        core.nvrtc_init()
    except cufunc.CudaSupportError as e:
        pytest.skip("NVRTC not available here: %s" % e)
    src = _two_loops().inspect_cuda()
    image, _ = core.compile_source(src + '\nextern "C" __global__ void k() {}\n',
                                   ("--fmad=false",), (9, 0))
    assert len(image) > 0
