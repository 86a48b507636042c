# curves.gp - written by `attnlab report`; re-run with `gnuplot curves.gp` in this directory.
if (!exists("out_png")) out_png = "curves.png"
if (!exists("out_svg")) out_svg = "curves.svg"
do for [fmt in "png svg"] {
  if (fmt eq "png") {
    set terminal pngcairo noenhanced size 1000,600 font ",11"
    set output out_png
  } else {
    set terminal svg noenhanced size 1000,600 dynamic font ",11"
    set output out_svg
  }
  set title "long_context: validation loss (mean over seeds; band: lowest to highest seed)"
  set ylabel "validation loss (nats/token)"
  set grid
  set key top right
  set xlabel "optimizer step (every configuration trains the same tokens per step)"
  set yrange [*:2.36]
  plot "curves.dat" index 0 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#1f5fa8" notitle, \
       "curves.dat" index 0 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#1f5fa8" title "base_mha", \
       "curves.dat" index 1 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#c03030" notitle, \
       "curves.dat" index 1 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#c03030" title "base_mha+mha+mha+mha-ropefraction0", \
       "curves.dat" index 2 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#2a8a3a" notitle, \
       "curves.dat" index 2 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#2a8a3a" title "long_base_mha_kind-yarn-factor4-originalseqlen256", \
       "curves.dat" index 3 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#7a3fa0" notitle, \
       "curves.dat" index 3 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#7a3fa0" title "long_base_mha_kind-ntk-factor4-originalseqlen256", \
       "curves.dat" index 4 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#d06a00" notitle, \
       "curves.dat" index 4 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#d06a00" title "long_base_mha+mha+mha+mha-ropefraction0_kind-yarn-factor4-originalseqlen256", \
       "curves.dat" index 5 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#107e86" notitle, \
       "curves.dat" index 5 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#107e86" title "long_base_mha+mha+mha+mha-ropefraction0_kind-ntk-factor4-originalseqlen256", \
       "curves.dat" index 6 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#8a5a2b" notitle, \
       "curves.dat" index 6 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#8a5a2b" title "long_base_mha+mha+mha+mha-ropefraction0_kind-linear-factor4-originalseqlen256", \
       "curves.dat" index 7 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#c2378a" notitle, \
       "curves.dat" index 7 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#c2378a" title "long_base_mha_kind-linear-factor4-originalseqlen256", \
       "curves.dat" index 8 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#505050" notitle, \
       "curves.dat" index 8 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#505050" title "long_base_mha+mha+mha+mha-ropefraction0_kind-none-factor1", \
       "curves.dat" index 9 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#1a1a80" notitle, \
       "curves.dat" index 9 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#1a1a80" title "long_base_mha_kind-none-factor1", \
       "curves.dat" index 10 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#1f5fa8" notitle, \
       "curves.dat" index 10 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#1f5fa8" title "long_base_local-window64+local-window64+local-window64+mha_kind-ntk-factor4-originalseqlen256", \
       "curves.dat" index 11 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#c03030" notitle, \
       "curves.dat" index 11 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#c03030" title "long_base_local-window64+local-window64+local-window64+mha_kind-none-factor1", \
       "curves.dat" index 12 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#2a8a3a" notitle, \
       "curves.dat" index 12 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#2a8a3a" title "base_local-window64+local-window64+local-window64+mha", \
       "curves.dat" index 13 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#7a3fa0" notitle, \
       "curves.dat" index 13 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#7a3fa0" title "long_base_local-window64+local-window64+local-window64+mha_kind-yarn-factor4-originalseqlen256", \
       "curves.dat" index 14 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#d06a00" notitle, \
       "curves.dat" index 14 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#d06a00" title "long_base_local-window64+local-window64+local-window64+mha_kind-linear-factor4-originalseqlen256", \
       "curves.dat" index 15 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#107e86" notitle, \
       "curves.dat" index 15 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#107e86" title "long_base_local-window64+local-window64+local-window64+mha-ropefr_kind-none-factor1", \
       "curves.dat" index 16 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#8a5a2b" notitle, \
       "curves.dat" index 16 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#8a5a2b" title "long_base_local-window64+local-window64+local-window64+mha-ropefr_kind-ntk-factor4-originalseqlen256", \
       "curves.dat" index 17 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#c2378a" notitle, \
       "curves.dat" index 17 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#c2378a" title "long_base_local-window64+local-window64+local-window64+mha-ropefr_kind-linear-factor4-originalseqlen256", \
       "curves.dat" index 18 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#505050" notitle, \
       "curves.dat" index 18 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#505050" title "long_base_local-window64+local-window64+local-window64+mha-ropefr_kind-yarn-factor4-originalseqlen256", \
       "curves.dat" index 19 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#1a1a80" notitle, \
       "curves.dat" index 19 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#1a1a80" title "base_local-window64+local-window64+local-window64+mha-ropefraction0", \
       "curves.dat" index 20 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#1f5fa8" notitle, \
       "curves.dat" index 20 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#1f5fa8" title "base_gqa-kv2+gqa-kv2+gqa-kv2+gqa-kv2-ropefraction0", \
       "curves.dat" index 21 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#c03030" notitle, \
       "curves.dat" index 21 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#c03030" title "base_gqa-kv2", \
       "curves.dat" index 22 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#2a8a3a" notitle, \
       "curves.dat" index 22 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#2a8a3a" title "long_base_gqa-kv2+gqa-kv2+gqa-kv2+gqa-kv2-ropefraction0_kind-ntk-factor4-originalseqlen256", \
       "curves.dat" index 23 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#7a3fa0" notitle, \
       "curves.dat" index 23 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#7a3fa0" title "long_base_gqa-kv2_kind-ntk-factor4-originalseqlen256", \
       "curves.dat" index 24 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#d06a00" notitle, \
       "curves.dat" index 24 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#d06a00" title "long_base_gqa-kv2_kind-yarn-factor4-originalseqlen256", \
       "curves.dat" index 25 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#107e86" notitle, \
       "curves.dat" index 25 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#107e86" title "long_base_gqa-kv2+gqa-kv2+gqa-kv2+gqa-kv2-ropefraction0_kind-none-factor1", \
       "curves.dat" index 26 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#8a5a2b" notitle, \
       "curves.dat" index 26 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#8a5a2b" title "long_base_gqa-kv2+gqa-kv2+gqa-kv2+gqa-kv2-ropefraction0_kind-yarn-factor4-originalseqlen256", \
       "curves.dat" index 27 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#c2378a" notitle, \
       "curves.dat" index 27 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#c2378a" title "long_base_gqa-kv2_kind-none-factor1", \
       "curves.dat" index 28 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#505050" notitle, \
       "curves.dat" index 28 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#505050" title "long_base_gqa-kv2_kind-linear-factor4-originalseqlen256", \
       "curves.dat" index 29 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#1a1a80" notitle, \
       "curves.dat" index 29 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#1a1a80" title "long_base_gqa-kv2+gqa-kv2+gqa-kv2+gqa-kv2-ropefraction0_kind-linear-factor4-originalseqlen256", \
       "curves.dat" index 30 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#1f5fa8" notitle, \
       "curves.dat" index 30 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#1f5fa8" title "base_mla-latent64-rope16", \
       "curves.dat" index 31 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#c03030" notitle, \
       "curves.dat" index 31 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#c03030" title "base_mla-latent64-rope16+mla-latent64-rope16+mla-latent64-rope16+mla-latent64-rope16-ropefracti", \
       "curves.dat" index 32 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#2a8a3a" notitle, \
       "curves.dat" index 32 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#2a8a3a" title "long_base_mla-latent64-rope16_kind-yarn-factor4-originalseqlen256", \
       "curves.dat" index 33 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#7a3fa0" notitle, \
       "curves.dat" index 33 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#7a3fa0" title "long_base_mla-latent64-rope16_kind-ntk-factor4-originalseqlen256", \
       "curves.dat" index 34 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#d06a00" notitle, \
       "curves.dat" index 34 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#d06a00" title "long_base_mla-latent64-rope16+mla-latent64-rope16+mla-latent64-ro_kind-yarn-factor4-originalseqlen256", \
       "curves.dat" index 35 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#107e86" notitle, \
       "curves.dat" index 35 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#107e86" title "long_base_mla-latent64-rope16_kind-linear-factor4-originalseqlen256", \
       "curves.dat" index 36 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#8a5a2b" notitle, \
       "curves.dat" index 36 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#8a5a2b" title "long_base_mla-latent64-rope16+mla-latent64-rope16+mla-latent64-ro_kind-ntk-factor4-originalseqlen256", \
       "curves.dat" index 37 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#c2378a" notitle, \
       "curves.dat" index 37 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#c2378a" title "long_base_mla-latent64-rope16+mla-latent64-rope16+mla-latent64-ro_kind-linear-factor4-originalseqlen256", \
       "curves.dat" index 38 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#505050" notitle, \
       "curves.dat" index 38 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#505050" title "long_base_mla-latent64-rope16_kind-none-factor1", \
       "curves.dat" index 39 using 1:4:5 with filledcurves fs transparent solid 0.18 noborder lc rgb "#1a1a80" notitle, \
       "curves.dat" index 39 using 1:3 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb "#1a1a80" title "long_base_mla-latent64-rope16+mla-latent64-rope16+mla-latent64-ro_kind-none-factor1"
  unset output
}
