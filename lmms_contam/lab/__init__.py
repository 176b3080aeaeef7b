"""The laboratory: the controlled-contamination experiment, its flaw and judge studies, the scan's speed bench and
the intervals' coverage study. Apart from the product: nothing outside this folder imports it, and what it needs
beyond the product (peft) comes with the `experiments` extra. Its commands join `lmms-contam` through the
`lmms_contam.commands` entry-point group."""
