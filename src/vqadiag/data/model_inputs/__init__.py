"""What models read: GQA- and VQA v2-format data for training and evaluation, question
batches with objects or pixels, images, box geometry."""
