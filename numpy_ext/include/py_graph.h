/* py_graph.h: CUDA graphs captured on a cufunc Stream (py_graph.c): the Graph type and
 * Stream.begin_capture / end_capture / is_capturing, added to the Stream type at init */
#ifndef CF_PY_GRAPH_H
#define CF_PY_GRAPH_H

#include "py_common.h"

int cf_py_graph_init_module(PyObject *m);

#endif
