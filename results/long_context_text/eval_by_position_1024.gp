# eval_by_position_1024.gp - written by `attnlab report`; re-run with `gnuplot eval_by_position_1024.gp` in this directory.
if (!exists("out_png")) out_png = "eval_by_position_1024.png"
if (!exists("out_svg")) out_svg = "eval_by_position_1024.svg"
do for [fmt in "png svg"] {
  if (fmt eq "png") {
    set terminal pngcairo noenhanced size 1000,600 font ",11"
    set output out_png
  } else {
    set terminal svg noenhanced size 1000,600 dynamic font ",11"
    set output out_svg
  }
  set title "long_context_text: loss by position in a 1024-token window (mean over seeds)"
  set xlabel "position in the window"
  set ylabel "loss (nats/token)"
  set grid
  set key outside right
  plot "eval_by_position_1024.dat" index 0 using 1:2 with linespoints pt 7 ps 0.6 title "long_base_mha_kind-ntk-factor4-originalseqlen256", \
       "eval_by_position_1024.dat" index 1 using 1:2 with linespoints pt 7 ps 0.6 title "long_base_mha_kind-yarn-factor4-originalseqlen256", \
       "eval_by_position_1024.dat" index 2 using 1:2 with linespoints pt 7 ps 0.6 title "long_base_mha+mha+mha+mha-ropefraction0_kind-ntk-factor4-originalseqlen256", \
       "eval_by_position_1024.dat" index 3 using 1:2 with linespoints pt 7 ps 0.6 title "long_base_mha+mha+mha+mha-ropefraction0_kind-yarn-factor4-originalseqlen256", \
       "eval_by_position_1024.dat" index 4 using 1:2 with linespoints pt 7 ps 0.6 title "long_base_mha_kind-none-factor1", \
       "eval_by_position_1024.dat" index 5 using 1:2 with linespoints pt 7 ps 0.6 title "long_base_mha+mha+mha+mha-ropefraction0_kind-none-factor1", \
       "eval_by_position_1024.dat" index 6 using 1:2 with linespoints pt 7 ps 0.6 title "base_mha", \
       "eval_by_position_1024.dat" index 7 using 1:2 with linespoints pt 7 ps 0.6 title "base_mha+mha+mha+mha-ropefraction0", \
       "eval_by_position_1024.dat" index 8 using 1:2 with linespoints pt 7 ps 0.6 title "long_base_mha_kind-linear-factor4-originalseqlen256", \
       "eval_by_position_1024.dat" index 9 using 1:2 with linespoints pt 7 ps 0.6 title "long_base_mha+mha+mha+mha-ropefraction0_kind-linear-factor4-originalseqlen256"
  unset output
}
