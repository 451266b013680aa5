"""Dataset and result file formats, one module per format: GQA, VQA v2, VQA-introspect,
basic questions, detections, relevance, prediction files. Each reads a file whole, checks
it and names the file and record of any problem."""
